//! What the operator's one-shot commands share: one plain control connection (never a
//! replication connection) with its questions and answers, the deadline they give up at,
//! and the fix a connection failure names.

use crate::catalog::questions::Row;
use crate::catalog::slot;
use crate::conn::Event;
use crate::io::Input;
use crate::pipeline::env::Env;
use crate::pipeline::pg_link::{LinkClosed, PgLink};
use crate::pipeline::queue::Queue;
use crate::time::{Mono, Now};
use crate::timer::{Deadline, TimerKind};

/// How long `status` and `drop-slot` wait for their answers.
pub const OPERATION_TIMEOUT_MS: u64 = 30_000;

/// One control connection asking one question at a time.
#[derive(Debug)]
pub(crate) struct Control {
    link: Option<PgLink>,
    rows: Vec<Vec<Option<String>>>,
    error: Option<String>,
}

/// What a control connection said.
pub(crate) enum Heard {
    Nothing,
    /// Connected: the first question may go.
    Ready,
    /// The question was answered (rows), or the server refused it.
    Answer(Result<Vec<Vec<Option<String>>>, String>),
    /// The connection is gone.
    Gone(String),
}

impl Control {
    pub(crate) fn open(queue: &mut Queue, env: &Env, name: &str) -> Result<Control, String> {
        let name = format!("{name}/{}", env.config.slot);
        let link = PgLink::open(queue, &env.config.pg, false, &name)?;
        Ok(Control {
            link: Some(link),
            rows: Vec::new(),
            error: None,
        })
    }

    pub(crate) fn owns(&self, input: &Input) -> bool {
        let conn = match input {
            Input::PgConnected { conn }
            | Input::PgTlsReady { conn, .. }
            | Input::PgBytes { conn, .. }
            | Input::PgClosed { conn, .. } => *conn,
            _ => return false,
        };
        self.link.as_ref().is_some_and(|l| l.id == conn)
    }

    pub(crate) fn ask(&mut self, queue: &mut Queue, sql: &str) -> Result<(), String> {
        self.rows.clear();
        self.error = None;
        match self.link.as_mut() {
            Some(link) => link.query(queue, sql),
            None => Err("no connection".into()),
        }
    }

    pub(crate) fn server_version(&self) -> u32 {
        self.link
            .as_ref()
            .and_then(|l| l.parameter("server_version"))
            .and_then(crate::wire::server_version::parse_server_version)
            .unwrap_or(slot::MIN_SERVER_VERSION)
    }

    pub(crate) fn close(&mut self, queue: &mut Queue) {
        if let Some(mut link) = self.link.take() {
            link.close(queue);
        }
    }

    pub(crate) fn on_input(&mut self, queue: &mut Queue, input: Input) -> Heard {
        let Some(link) = self.link.as_mut() else {
            return Heard::Nothing;
        };
        match input {
            Input::PgConnected { .. } => link.on_connected(queue),
            Input::PgTlsReady {
                server_certificate, ..
            } => link.on_tls_ready(queue, server_certificate.as_deref()),
            Input::PgClosed { error, .. } => match link.on_closed(queue, error) {
                LinkClosed::Retrying => {}
                LinkClosed::Lost(why) | LinkClosed::Fatal(why) => {
                    link.abandon(queue);
                    self.link = None;
                    return Heard::Gone(why);
                }
            },
            Input::PgBytes { bytes, .. } => {
                for event in link.on_bytes(queue, &bytes) {
                    match event {
                        Event::Ready => return Heard::Ready,
                        Event::DataRow(row) => self.rows.push(
                            row.columns
                                .iter()
                                .map(|c| {
                                    c.as_ref().map(|b| String::from_utf8_lossy(b).into_owned())
                                })
                                .collect(),
                        ),
                        Event::QueryError(e) => self.error = Some(e.to_string()),
                        Event::QueryDone { .. } => {
                            let rows = std::mem::take(&mut self.rows);
                            return Heard::Answer(match self.error.take() {
                                Some(error) => Err(error),
                                None => Ok(rows),
                            });
                        }
                        Event::Failed(error) => {
                            self.close(queue);
                            return Heard::Gone(error.to_string());
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        Heard::Nothing
    }
}

pub(crate) fn with_rows<T>(rows: &[Vec<Option<String>>], read: impl FnOnce(&[Row<'_>]) -> T) -> T {
    let borrowed: Vec<Vec<Option<&str>>> = rows
        .iter()
        .map(|r| r.iter().map(|c| c.as_deref()).collect())
        .collect();
    let views: Vec<Row<'_>> = borrowed.iter().map(Vec::as_slice).collect();
    read(&views)
}

/// How to fix a connection that failed with `why` (`pg_link::connect_fix`).
pub(crate) fn connect_fix(env: &Env, why: &str) -> String {
    crate::pipeline::pg_link::connect_fix(&env.config.pg, why)
}

pub(crate) fn now_of(queue: &mut Queue, now: Now) {
    queue.now = Now {
        mono: queue.now.mono.max(now.mono),
        wall: now.wall,
    };
}

pub(crate) fn deadline(queue: &Queue, at: Mono) -> Option<Deadline> {
    (!queue.exited()).then_some(Deadline {
        at,
        why: TimerKind::OperationDeadline,
    })
}
