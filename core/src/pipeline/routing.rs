//! Every input to the part of the pipeline that owns it: bytes by connection id, an HTTP
//! answer through the Feldera link (`FelderaLink::deliver` says whom it is for), timers by
//! their reason; then every deadline is derived again from the state.

use super::cx::Cx;
use super::feldera_link::Delivery;
use super::handover::Next;
use super::keeper::News;
use super::lifecycle::{Phase, Pipeline};
use super::policy::{Failure, FailureKind};
use super::run::no_progress_reason;
use crate::feldera::Reply;
use crate::io::{Command, HttpId, Input, Level, Topic};
use crate::timer::{TimerKind, TimerTable};

impl Pipeline {
    // ---- routing inputs to the phase that owns them ----

    /// An input for the slot monitor's connection: `None` when it is not one.
    fn dispatch_monitor(&mut self, input: &Input) -> Option<Next> {
        let conn = match input {
            Input::PgConnected { conn }
            | Input::PgTlsReady { conn, .. }
            | Input::PgBytes { conn, .. }
            | Input::PgClosed { conn, .. } => *conn,
            _ => return None,
        };
        let monitor = self.monitor.as_mut().filter(|m| m.owns(conn))?;
        let cx = &mut Cx {
            queue: &mut self.queue,
            link: &mut self.link,
            env: &self.env,
            run: &mut self.run,
        };
        Some(match input {
            Input::PgConnected { .. } => {
                monitor.on_connected(cx);
                Next::Stay
            }
            Input::PgTlsReady {
                server_certificate, ..
            } => {
                monitor.on_tls_ready(cx, server_certificate.as_deref());
                Next::Stay
            }
            Input::PgBytes { bytes, .. } => monitor.on_bytes(cx, bytes),
            Input::PgClosed { error, .. } => {
                monitor.on_closed(cx, error.clone());
                Next::Stay
            }
            _ => Next::Stay,
        })
    }

    /// An input for the online copy's connection (docs/online-copy.md): `None` when it is
    /// not one.
    fn dispatch_copier(&mut self, input: &Input) -> Option<Next> {
        let conn = match input {
            Input::PgConnected { conn }
            | Input::PgTlsReady { conn, .. }
            | Input::PgBytes { conn, .. }
            | Input::PgClosed { conn, .. } => *conn,
            _ => return None,
        };
        let (mut cx, phase) = self.cx();
        let streaming = match phase {
            Phase::Streaming(s) => s,
            Phase::Retracting(s) => s.streaming_mut(),
            _ => return None,
        };
        if !streaming.owns_copier_conn(conn) {
            return None;
        }
        let cx = &mut cx;
        Some(match input {
            Input::PgConnected { .. } => {
                streaming.on_copier_connected(cx);
                Next::Stay
            }
            Input::PgTlsReady {
                server_certificate, ..
            } => {
                streaming.on_copier_tls_ready(cx, server_certificate.as_deref());
                Next::Stay
            }
            Input::PgBytes { bytes, .. } => streaming.on_copier_bytes(cx, bytes),
            Input::PgClosed { error, .. } => streaming.on_copier_closed(cx, error.clone()),
            _ => Next::Stay,
        })
    }

    /// A request ended: the link does its part of the end and says whom the answer is for.
    fn on_http_end(&mut self, id: HttpId, answered: bool, how: &str, reply: Reply<'_>) -> Next {
        let delivery = self.link.deliver(&mut self.queue, id, answered, how, reply);
        if matches!(delivery, Delivery::Keeper) {
            // An ended session's keeper asked too: its answer finds no owner but the phase.
            if let Some(keeper) = self.keeper.as_mut().filter(|k| k.owns(id)) {
                let cx = &mut Cx {
                    queue: &mut self.queue,
                    link: &mut self.link,
                    env: &self.env,
                    run: &mut self.run,
                };
                let news = keeper.on_http(cx, id, reply);
                return self.on_keeper_news(news);
            }
        }
        let (mut cx, phase) = self.cx();
        let cx = &mut cx;
        match delivery {
            Delivery::Phase | Delivery::Keeper => route_http(cx, phase, id, reply),
            Delivery::Handled => Next::Stay,
            Delivery::Freed => {
                resume_phase_writes(cx, phase);
                Next::Stay
            }
            Delivery::Failed(failure) => Next::Fail(failure),
        }
    }

    /// What the keeper learned, for the phase.
    fn on_keeper_news(&mut self, news: Result<News, Failure>) -> Next {
        let news = match news {
            Ok(News::Nothing) => return Next::Stay,
            Ok(news) => news,
            Err(failure) => return Next::Fail(failure),
        };
        let (mut cx, phase) = self.cx();
        let cx = &mut cx;
        match phase {
            Phase::Snapshotting(s) => s.on_checkpoint(cx, &news),
            Phase::Streaming(s) => s.on_checkpoint(cx, &news),
            Phase::Retracting(s) => s.on_checkpoint(cx, &news),
            Phase::Stopping(s) => s.on_checkpoint(cx, &news),
            Phase::Starting(_) | Phase::BackingOff { .. } | Phase::Exited => Next::Stay,
        }
    }

    pub(super) fn dispatch(&mut self, input: Input) -> Next {
        if let Some(next) = self
            .dispatch_monitor(&input)
            .or_else(|| self.dispatch_copier(&input))
        {
            return next;
        }
        if matches!(input, Input::StateWritten { .. }) && self.run.stale_state_writes > 0 {
            // Writes are answered in order: the first answers belong to ended sessions.
            self.run.stale_state_writes -= 1;
            return Next::Stay;
        }
        let (mut cx, phase) = self.cx();
        let cx = &mut cx;
        match input {
            Input::PgConnected { conn } => match phase {
                Phase::Starting(s) => s.on_pg_connected(cx, conn),
                Phase::Snapshotting(s) => s.on_pg_connected(cx, conn),
                Phase::Stopping(s) => s.on_pg_connected(cx, conn),
                _ => Next::Stay,
            },
            Input::PgTlsReady {
                conn,
                server_certificate,
            } => {
                let certificate = server_certificate.as_deref();
                match phase {
                    Phase::Starting(s) => s.on_pg_tls_ready(cx, conn, certificate),
                    Phase::Snapshotting(s) => s.on_pg_tls_ready(cx, conn, certificate),
                    Phase::Stopping(s) => s.on_pg_tls_ready(cx, conn, certificate),
                    _ => {}
                }
                Next::Stay
            }
            Input::PgBytes { conn, bytes } => match phase {
                Phase::Starting(s) if s.conn() == conn => s.on_pg_bytes(cx, &bytes),
                Phase::Snapshotting(s) => s.on_pg_bytes(cx, conn, &bytes),
                Phase::Streaming(s) if s.conn() == conn => s.on_pg_bytes(cx, &bytes),
                Phase::Retracting(s) if s.streaming().conn() == conn => s.on_pg_bytes(cx, &bytes),
                Phase::Stopping(s) => s.on_pg_bytes(cx, conn, &bytes),
                _ => Next::Stay,
            },
            Input::PgClosed { conn, error } => match phase {
                Phase::Starting(s) if s.conn() == conn => s.on_pg_closed(cx, error),
                Phase::Snapshotting(s) => s.on_pg_closed(cx, conn, error),
                Phase::Streaming(s) if s.conn() == conn => s.on_pg_closed(cx, error),
                Phase::Retracting(s) => s.on_pg_closed(cx, conn, error),
                Phase::Stopping(s) => s.on_pg_closed(cx, conn, error),
                _ => Next::Stay,
            },
            Input::HttpChunk { id, bytes } => {
                let owned = match phase {
                    Phase::Retracting(s) => s.on_http_chunk(cx, id, &bytes),
                    Phase::Snapshotting(s) => s.on_http_chunk(cx, id, &bytes),
                    _ => None,
                };
                // A streamed answer nobody reads any more (its session ended): stop it, so
                // the shell does not hold it open until its timeout.
                owned.unwrap_or_else(|| {
                    cx.queue.push(Command::HttpCancel { id });
                    Next::Stay
                })
            }
            Input::Tick => {
                self.on_tick();
                Next::Stay
            }
            Input::Shutdown => {
                self.stop();
                Next::Stay
            }
            Input::StateRead { contents } => match phase {
                Phase::Starting(s) => s.on_state_read(cx, contents),
                _ => Next::Stay,
            },
            Input::StateWritten { result } => match phase {
                Phase::Starting(s) => s.on_state_written(cx, result),
                Phase::Snapshotting(s) => s.on_state_written(cx, result),
                Phase::Streaming(s) => s.on_state_written(cx, result),
                Phase::Retracting(s) => s.on_state_written(cx, result),
                Phase::Stopping(s) => s.on_state_written(cx, result),
                _ => Next::Stay,
            },
            // The pipeline never removes the state file.
            Input::StateRemoved { .. } => Next::Stay,
            Input::HttpDone { id, status, body } => {
                let reply = Reply::Answered {
                    status,
                    body: &body,
                };
                self.on_http_end(id, status < 500, &format!("answered {status}"), reply)
            }
            Input::HttpFailed { id, error } => {
                let how = format!("failed: {error}");
                self.on_http_end(id, false, &how, Reply::Failed { error: &error })
            }
        }
    }

    /// Timers that fired, earliest first; each may move the pipeline on.
    pub(super) fn on_tick(&mut self) {
        let now = self.queue.now.mono;
        for kind in self.timers.expire(now) {
            if self.queue.exited() {
                break;
            }
            let next = match kind {
                TimerKind::NoProgress => {
                    if self.has_pending_work() && self.run.progress.expired(now) {
                        Next::Fail(Failure::new(
                            FailureKind::NoProgress,
                            no_progress_reason(&self.env, &self.run),
                        ))
                    } else {
                        Next::Stay
                    }
                }
                TimerKind::Reconnect => {
                    if matches!(self.phase, Phase::BackingOff { until } if now >= until) {
                        self.start_session();
                    }
                    Next::Stay
                }
                TimerKind::Progress => {
                    let flush = self.run.ack.flush();
                    if let Some(line) =
                        self.run
                            .report
                            .report(now, self.phase.name().as_str(), flush)
                    {
                        self.queue.note(Level::Info, Topic::Progress, line);
                    }
                    let copying = match &self.phase {
                        Phase::Streaming(s) => s.copy_description(now),
                        Phase::Retracting(s) => s.streaming().copy_description(now),
                        _ => None,
                    };
                    if let Some(line) = copying {
                        self.queue.note(Level::Info, Topic::Progress, line);
                    }
                    Next::Stay
                }
                TimerKind::FelderaWatch | TimerKind::Checkpoint => match self.keeper.as_mut() {
                    Some(keeper) => {
                        let cx = &mut Cx {
                            queue: &mut self.queue,
                            link: &mut self.link,
                            env: &self.env,
                            run: &mut self.run,
                        };
                        let news = keeper.on_timer(cx, kind);
                        self.on_keeper_news(news)
                    }
                    None => Next::Stay,
                },
                TimerKind::CopyRetry => {
                    let (mut cx, phase) = self.cx();
                    match phase {
                        Phase::Streaming(s) => s.on_copy_retry(&mut cx),
                        Phase::Retracting(s) => s.streaming_mut().on_copy_retry(&mut cx),
                        _ => Next::Stay,
                    }
                }
                TimerKind::Quarantine => {
                    let (mut cx, phase) = self.cx();
                    if cx.link.on_quarantine_timer(cx.queue) {
                        resume_phase_writes(&mut cx, phase);
                    }
                    Next::Stay
                }
                TimerKind::SlotMonitor => {
                    if let Some(monitor) = self.monitor.as_mut() {
                        let cx = &mut Cx {
                            queue: &mut self.queue,
                            link: &mut self.link,
                            env: &self.env,
                            run: &mut self.run,
                        };
                        monitor.on_timer(cx);
                    }
                    Next::Stay
                }
                other => {
                    let (mut cx, phase) = self.cx();
                    match phase {
                        Phase::Snapshotting(s) => s.on_timer(&mut cx, other),
                        Phase::Streaming(s) => s.on_timer(&mut cx, other),
                        Phase::Retracting(s) => s.on_timer(&mut cx, other),
                        Phase::Stopping(s) => s.on_timer(&mut cx, other),
                        _ => Next::Stay,
                    }
                }
            };
            self.apply(next);
        }
    }

    /// Whether anything waits to become durable, or the stream has not shown it is caught
    /// up: only then does the no-progress deadline run.
    pub(super) fn has_pending_work(&self) -> bool {
        let streaming = match &self.phase {
            Phase::Streaming(s) => &**s,
            Phase::Stopping(s) => s.streaming(),
            Phase::Exited => return false,
            Phase::Starting(_)
            | Phase::Snapshotting(_)
            | Phase::Retracting(_)
            | Phase::BackingOff { .. } => return true,
        };
        streaming.has_pending_work(&self.run.ack)
    }

    /// Re-derives every timer from the state, so a deadline exists whenever work is pending.
    pub(super) fn refresh_timers(&mut self) {
        let now = self.queue.now.mono;
        let pending = self.has_pending_work();
        if !pending {
            self.run.progress.on_progress(now);
        }
        let mut timers = TimerTable::default();
        match &self.phase {
            Phase::Snapshotting(s) => s.arm(&mut timers),
            Phase::Streaming(s) => s.arm(&mut timers),
            Phase::Retracting(s) => s.arm(&mut timers),
            Phase::Stopping(s) => s.arm(&mut timers),
            Phase::BackingOff { until } => timers.set(TimerKind::Reconnect, *until),
            Phase::Starting(_) | Phase::Exited => {}
        }
        if let Some(monitor) = &self.monitor {
            monitor.arm(&mut timers);
        }
        if let Some(keeper) = &self.keeper {
            keeper.arm(&mut timers, &self.run, now);
        }
        if pending {
            timers.set(TimerKind::NoProgress, self.run.progress.deadline());
        }
        if let Some(at) = self.run.report.next_at() {
            timers.set(TimerKind::Progress, at);
        }
        if let Some(at) = self.link.quarantine_deadline() {
            timers.set(TimerKind::Quarantine, at);
        }
        self.timers = timers;
    }
}

fn resume_phase_writes(cx: &mut Cx<'_>, phase: &mut Phase) {
    match phase {
        Phase::Snapshotting(s) => s.resume_writes(cx),
        Phase::Streaming(s) => s.resume_writes(cx),
        Phase::Retracting(s) => s.resume_writes(cx),
        Phase::Stopping(s) => s.resume_writes(cx),
        Phase::Starting(_) | Phase::BackingOff { .. } | Phase::Exited => {}
    }
}

fn route_http(cx: &mut Cx<'_>, phase: &mut Phase, id: HttpId, reply: Reply<'_>) -> Next {
    // An answer to a request of an ended session finds no owner: nothing waits for it.
    match phase {
        Phase::Starting(s) => s.on_http(cx, id, reply),
        Phase::Snapshotting(s) => s.on_http(cx, id, reply),
        Phase::Streaming(s) => s.on_http(cx, id, reply),
        Phase::Retracting(s) => s.on_http(cx, id, reply),
        Phase::Stopping(s) => s.on_http(cx, id, reply),
        Phase::BackingOff { .. } | Phase::Exited => Next::Stay,
    }
}
