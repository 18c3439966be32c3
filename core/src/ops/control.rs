//! What the operator's one-shot commands share: one plain control connection (never a
//! replication connection) with its questions and answers, the deadline they give up at,
//! and the fix a connection failure names. With several hosts in `PG_URL` the connection
//! goes to the host a start would use: the hosts in order, passing over one that cannot be
//! reached or is not what `target_session_attrs` asks for.

use crate::catalog::questions::Row;
use crate::catalog::slot;
use crate::config::{PgConnConfig, SessionAttrs};
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
    /// The settings, with every host; the connection's application name.
    pg: PgConnConfig,
    name: String,
    /// The host tried now, whether it is the one used, and why the earlier ones were
    /// passed over.
    host: usize,
    ready: bool,
    passed: Vec<String>,
    /// `prefer-standby`: the first host that answered without being a standby, taken
    /// once no host is one.
    fallback: Option<usize>,
    settling: bool,
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
        let link = PgLink::open(queue, &env.config.pg.at(0), false, &name)?;
        Ok(Control {
            link: Some(link),
            rows: Vec::new(),
            error: None,
            pg: env.config.pg.clone(),
            name,
            host: 0,
            ready: false,
            passed: Vec::new(),
            fallback: None,
            settling: false,
        })
    }

    /// The host the connection uses (once `Heard::Ready`), as `host:port`.
    pub(crate) fn host(&self) -> String {
        let pg = self.pg.at(self.host);
        format!("{}:{}", pg.host, pg.port)
    }

    /// Before the connection is used: pass over the host tried now (`why`) and try the
    /// next; `false` when none is left.
    fn next_host(&mut self, queue: &mut Queue, why: String) -> bool {
        if self.ready || self.pg.hosts.len() <= 1 {
            return false;
        }
        self.passed.push(format!("{}: {why}", self.host()));
        if let Some(link) = self.link.as_mut() {
            link.close(queue);
        }
        self.link = None;
        let next = match (self.host + 1 < self.pg.hosts.len(), self.fallback) {
            (true, _) => self.host + 1,
            (false, Some(fallback)) if !self.settling => {
                self.settling = true;
                fallback
            }
            _ => return false,
        };
        self.host = next;
        match PgLink::open(queue, &self.pg.at(next), false, &self.name) {
            Ok(link) => {
                self.link = Some(link);
                true
            }
            Err(_) => false,
        }
    }

    /// Why no host could be used: each one's reason.
    fn none_left(&self, why: String) -> String {
        if self.passed.is_empty() {
            return why;
        }
        format!(
            "no host of PG_URL could be used (target_session_attrs={}): {}; {}: {why}",
            self.pg.target_session_attrs.name(),
            self.passed.join("; "),
            self.host()
        )
    }

    /// The host tried now answered: whether it is what `target_session_attrs` asks for.
    fn serves(&mut self, recovery: bool, read_only: bool) -> Result<(), String> {
        let attrs = self.pg.target_session_attrs;
        if self.settling || attrs.accepts(recovery, read_only, false) {
            return Ok(());
        }
        if attrs == SessionAttrs::PreferStandby && self.fallback.is_none() {
            self.fallback = Some(self.host);
        }
        let what = if recovery {
            "a standby"
        } else {
            "not a standby"
        };
        Err(format!(
            "{what}, not what target_session_attrs={} asks for",
            attrs.name()
        ))
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
                    if self.next_host(queue, why.clone()) {
                        return Heard::Nothing;
                    }
                    return Heard::Gone(self.none_left(why));
                }
            },
            Input::PgBytes { bytes, .. } => {
                let events = link.on_bytes(queue, &bytes);
                for event in events {
                    match event {
                        Event::Ready => {
                            let on = |link: &PgLink, name: &str| link.parameter(name) == Some("on");
                            let reported = self.link.as_ref().map(|link| {
                                (
                                    on(link, "in_hot_standby"),
                                    on(link, "default_transaction_read_only"),
                                )
                            });
                            let verdict = match reported {
                                Some((recovery, read_only)) => self.serves(recovery, read_only),
                                None => Ok(()),
                            };
                            if let Err(why) = verdict {
                                if self.next_host(queue, why.clone()) {
                                    return Heard::Nothing;
                                }
                                self.close(queue);
                                return Heard::Gone(self.none_left(why));
                            }
                            self.ready = true;
                            return Heard::Ready;
                        }
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
                            if self.next_host(queue, error.to_string()) {
                                return Heard::Nothing;
                            }
                            self.close(queue);
                            return Heard::Gone(self.none_left(error.to_string()));
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
