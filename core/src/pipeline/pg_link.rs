//! One PostgreSQL connection as the pipeline sees it: the core's conversation machine plus
//! its connection id, turning machine output into `PgWrite` commands.
//!
//! A link may make a second attempt on a new connection, as libpq does for
//! `sslmode=allow` and `prefer` (see `conn::TlsPlan`): the pipeline sees one link whose
//! `id` changed, and never hears of the first attempt's end.

use super::handover::Next;
use super::policy::{Failure, FailureKind as Kind};
use super::queue::Queue;
use crate::config::PgConnConfig;
use crate::conn::{
    Attempt, ConnError, Connection, ConnectionConfig, Encryption, Event, Password, TlsPlan,
};
use crate::io::{Command, ConnFailure, ConnId, FailureKind, Level, PgTarget, TlsVerify};
use crate::report::with_fix;
use crate::wire::StatusUpdate;
use std::collections::VecDeque;

#[derive(Debug)]
pub(crate) struct PgLink {
    pub(crate) id: ConnId,
    conn: Connection,
    connected: bool,
    closed: bool,
    /// Who logs in, for a second attempt.
    identity: ConnectionConfig,
    target: PgTarget,
    server_name: String,
    timeout_ms: Option<u64>,
    plan: TlsPlan,
    /// `PgStartTls` was sent and the handshake has not completed.
    handshaking: bool,
    /// Startup finished (ReadyForQuery): failures no longer lead to a second attempt.
    ready: bool,
}

/// How a link's connection ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LinkClosed {
    /// A second attempt is under way: nothing ended for the pipeline.
    Retrying,
    /// Lost, for a reason a later session may not meet again.
    Lost(String),
    /// The server's certificate was refused: no retry can fix that.
    Fatal(String),
}

/// The socket of a server: a TCP address, or `<dir>/.s.PGSQL.<port>` when the host is a
/// socket directory (as libpq).
fn target_of(pg: &PgConnConfig) -> PgTarget {
    if pg.is_unix_socket() {
        PgTarget::Unix {
            path: format!("{}/.s.PGSQL.{}", pg.host.trim_end_matches('/'), pg.port),
        }
    } else {
        PgTarget::Tcp {
            host: pg.host.clone(),
            port: pg.port,
            keepalive: pg.tcp_keepalive(),
        }
    }
}

impl PgLink {
    /// Asks the shell for a connection; the first message waits until it is open.
    pub(crate) fn open(
        queue: &mut Queue,
        pg: &PgConnConfig,
        replication: bool,
        application_name: &str,
    ) -> Result<PgLink, String> {
        let plan = TlsPlan::new(pg.sslmode, pg.is_unix_socket(), pg.sslrootcert.is_some());
        let identity = ConnectionConfig {
            user: pg.user.clone(),
            database: pg.database.clone(),
            password: pg.password.as_ref().map(|p| Password::new(p.expose())),
            application_name: application_name.to_owned(),
            replication,
            encryption: plan.first(),
            keepalive: pg.tcp_keepalive(),
        };
        let conn = Connection::new(identity.clone()).map_err(|e| e.to_string())?;
        let link = PgLink {
            id: queue.conn_id(),
            conn,
            connected: false,
            closed: false,
            identity,
            target: target_of(pg),
            server_name: pg.host.clone(),
            timeout_ms: pg.connect_timeout_ms,
            plan,
            handshaking: false,
            ready: false,
        };
        link.push_connect(queue);
        Ok(link)
    }

    fn push_connect(&self, queue: &mut Queue) {
        queue.push(Command::PgConnect {
            conn: self.id,
            target: self.target.clone(),
            timeout_ms: self.timeout_ms,
        });
    }

    /// Drops the current attempt and starts the next one on a new connection.
    fn reattempt(&mut self, queue: &mut Queue, encryption: Encryption, why: &str) {
        let old = self.id;
        queue.push(Command::PgClose { conn: old });
        self.identity.encryption = encryption;
        let Ok(conn) = Connection::new(self.identity.clone()) else {
            // The same identity was accepted for the first attempt.
            return;
        };
        self.conn = conn;
        self.id = queue.conn_id();
        self.connected = false;
        self.handshaking = false;
        let how = match encryption {
            Encryption::Plain => "in plain text",
            Encryption::Request { .. } => "with TLS",
        };
        queue.log(
            Level::Info,
            format!(
                "{old}: {why}; trying again {how} as {} (sslmode={})",
                self.id,
                self.plan_mode()
            ),
        );
        self.push_connect(queue);
    }

    fn plan_mode(&self) -> &'static str {
        self.plan.mode().name()
    }

    pub(crate) fn on_connected(&mut self, queue: &mut Queue) {
        self.connected = true;
        self.flush(queue);
    }

    /// The TLS handshake succeeded: the startup message goes out, encrypted.
    pub(crate) fn on_tls_ready(&mut self, queue: &mut Queue, server_certificate: Option<&[u8]>) {
        if !self.handshaking {
            return;
        }
        self.handshaking = false;
        self.conn.tls_established(server_certificate);
        let checked = match self.plan.verify() {
            TlsVerify::None => "not verified",
            TlsVerify::Chain => "chain verified",
            TlsVerify::Full => "chain and host name verified",
        };
        queue.log(
            Level::Info,
            format!(
                "{}: TLS established with {} (server certificate {checked})",
                self.id, self.server_name
            ),
        );
        self.flush(queue);
    }

    /// The shell reported the connection's end: a second attempt, or how it ended.
    pub(crate) fn on_closed(
        &mut self,
        queue: &mut Queue,
        error: Option<ConnFailure>,
    ) -> LinkClosed {
        let kind = error.as_ref().map(|e| e.kind);
        let why = error.map_or_else(
            || "the server closed the connection".to_owned(),
            |e| e.message,
        );
        if self.handshaking {
            if let Some(encryption) = self.plan.retry(Attempt::HandshakeFailed) {
                self.reattempt(queue, encryption, &format!("TLS handshake failed ({why})"));
                return LinkClosed::Retrying;
            }
            if kind == Some(FailureKind::TlsVerification) {
                return LinkClosed::Fatal(format!(
                    "the server's TLS certificate was refused: {why}"
                ));
            }
        }
        LinkClosed::Lost(why)
    }

    /// Feeds bytes and returns the events they completed, in order.
    pub(crate) fn on_bytes(&mut self, queue: &mut Queue, bytes: &[u8]) -> Vec<Event> {
        let mut events = VecDeque::new();
        self.on_bytes_into(queue, bytes, &mut events);
        Vec::from(events)
    }

    /// `on_bytes`, appending the events to `events` (a backlog the caller keeps), so a
    /// stream of COPY rows is not collected into a fresh list per read.
    pub(crate) fn on_bytes_into(
        &mut self,
        queue: &mut Queue,
        bytes: &[u8],
        events: &mut VecDeque<Event>,
    ) {
        self.conn.handle_bytes(bytes);
        self.drain(queue, events);
    }

    fn drain(&mut self, queue: &mut Queue, events: &mut VecDeque<Event>) {
        let before = events.len();
        while let Some(event) = self.conn.poll_event() {
            match event {
                Event::TlsRequested => {
                    self.handshaking = true;
                    queue.push(Command::PgStartTls {
                        conn: self.id,
                        server_name: self.server_name.clone(),
                        verify: self.plan.verify(),
                        timeout_ms: self.timeout_ms,
                    });
                }
                Event::Authenticated => {
                    self.log_authenticated(queue);
                    events.push_back(event);
                }
                Event::Ready => {
                    self.ready = true;
                    events.push_back(event);
                }
                Event::Failed(ConnError::Server(error)) if !self.ready => {
                    let rejected = Attempt::Rejected {
                        encrypted: self.conn.is_encrypted(),
                    };
                    match self.plan.retry(rejected) {
                        Some(encryption) => {
                            let why = format!("the server refused the connection ({error})");
                            self.reattempt(queue, encryption, &why);
                            events.truncate(before);
                            return;
                        }
                        None => events.push_back(Event::Failed(ConnError::Server(error))),
                    }
                }
                event => events.push_back(event),
            }
        }
        self.flush(queue);
    }

    /// Over TLS the operator learns which authentication ran (whether SCRAM was bound to
    /// the TLS session); plain connections say it at debug level.
    fn log_authenticated(&self, queue: &mut Queue) {
        let method = self.conn.authentication_method().unwrap_or("unknown");
        if self.conn.is_encrypted() {
            let bound = if method.ends_with("-PLUS") {
                ", channel binding tls-server-end-point"
            } else {
                ""
            };
            queue.log(
                Level::Info,
                format!("{}: authenticated with {method} over TLS{bound}", self.id),
            );
        } else {
            queue.log(
                Level::Debug,
                format!("{}: authenticated with {method}", self.id),
            );
        }
    }

    /// Moves whatever the machine wants to send into `PgWrite` commands.
    pub(crate) fn flush(&mut self, queue: &mut Queue) {
        if !self.connected || self.closed {
            return;
        }
        while let Some(bytes) = self.conn.poll_transmit() {
            queue.push(Command::PgWrite {
                conn: self.id,
                bytes,
            });
        }
    }

    pub(crate) fn query(&mut self, queue: &mut Queue, sql: &str) -> Result<(), String> {
        self.conn.query(sql).map_err(|e| e.to_string())?;
        self.flush(queue);
        Ok(())
    }

    pub(crate) fn send_status(
        &mut self,
        queue: &mut Queue,
        update: StatusUpdate,
    ) -> Result<(), String> {
        self.conn
            .send_status_update(update)
            .map_err(|e| e.to_string())?;
        self.flush(queue);
        Ok(())
    }

    pub(crate) fn pause_read(&self, queue: &mut Queue) {
        queue.push(Command::PgPauseRead { conn: self.id });
    }

    pub(crate) fn resume_read(&self, queue: &mut Queue) {
        queue.push(Command::PgResumeRead { conn: self.id });
    }

    /// Ends the stream politely when streaming, then closes. Idempotent.
    pub(crate) fn close(&mut self, queue: &mut Queue) {
        if self.closed {
            return;
        }
        let _ = self.conn.finish_stream();
        self.conn.close();
        self.flush(queue);
        self.closed = true;
        queue.push(Command::PgClose { conn: self.id });
    }

    /// Forgets the connection without writing anything (it is already gone).
    pub(crate) fn abandon(&mut self, queue: &mut Queue) {
        if !self.closed {
            self.closed = true;
            queue.push(Command::PgClose { conn: self.id });
        }
    }

    /// Whether the connection runs over TLS.
    pub(crate) fn is_encrypted(&self) -> bool {
        self.conn.is_encrypted()
    }

    pub(crate) fn parameter(&self, name: &str) -> Option<&str> {
        self.conn.parameters().get(name).map(String::as_str)
    }
}

/// How to fix a PostgreSQL connection that failed with `why` (its words, with the server's
/// SQLSTATE when the server refused it): what `check`, `status`, `ddl` and `drop-slot` print
/// with the finding, and what a start refused for it says after its reason.
pub(crate) fn connect_fix(pg: &PgConnConfig, why: &str) -> String {
    let code = |code: &str| why.contains(&format!(" {code}:"));
    let (user, database) = (&pg.user, &pg.database);
    if code("28P01") {
        format!("check the password of user {user} (PGPASSWORD, the password file, or PG_URL)")
    } else if code("28000") {
        format!(
            "check that role {user} exists and that a pg_hba.conf line admits it to database {database} from this host \
             (a replication connection of slotline's is matched by the database's name, not by `replication`), \
             then reload PostgreSQL"
        )
    } else if code("3D000") {
        format!("create database {database}, or name one that exists in PG_URL")
    } else if code("42501") || why.contains("replication") {
        format!(
            "ALTER ROLE {user} REPLICATION (and let pg_hba.conf admit it to database {database})"
        )
    } else {
        format!(
            "check PG_URL (host {}, port {}, database {database}, user {user}), the password and pg_hba.conf",
            pg.host, pg.port
        )
    }
}

/// ` to host:port` when `PG_URL` lists several hosts (`pg` is the one connected to), else
/// nothing: which host failed matters only when there is a choice.
fn to_host(pg: &PgConnConfig) -> String {
    if pg.hosts.len() > 1 {
        format!(" to {}:{}", pg.host, pg.port)
    } else {
        String::new()
    }
}

/// What a failed connection means: server errors that no retry can fix (wrong password,
/// unknown role or database, no privilege, an authentication method slotline lacks, TLS
/// the server cannot or will not speak) refuse; everything else is a connection that may
/// come back.
pub(crate) fn conn_failure(pg: &PgConnConfig, error: ConnError) -> Failure {
    let permanent = match &error {
        ConnError::Server(e) => e.code.starts_with("28") || e.code == "3D000" || e.code == "42501",
        ConnError::UnsupportedAuthentication { .. }
        | ConnError::PasswordRequired { .. }
        | ConnError::Scram(_)
        | ConnError::TlsNotOffered
        | ConnError::Tls(_) => true,
        _ => false,
    };
    if permanent {
        let why = format!("PostgreSQL refused the connection: {error}");
        Failure::new(Kind::PgRefused, with_fix(&why, &connect_fix(pg, &why)))
    } else {
        Failure::new(
            Kind::PgUnreachable,
            format!("replication connection{} failed: {error}", to_host(pg)),
        )
    }
}

impl PgLink {
    /// The shell reported this link's connection closed: a second attempt goes on quietly;
    /// a refused server certificate refuses; anything else is a lost connection (`what`
    /// names it in the message; `pg`, the settings it was opened with, the fix of a refusal).
    pub(crate) fn closed(
        &mut self,
        queue: &mut Queue,
        pg: &PgConnConfig,
        error: Option<ConnFailure>,
        what: &str,
    ) -> Next {
        match self.on_closed(queue, error) {
            LinkClosed::Retrying => Next::Stay,
            LinkClosed::Fatal(why) => {
                let why = format!("cannot connect to PostgreSQL: {why}");
                let fix = connect_fix(pg, &why);
                Next::Fail(Failure::new(Kind::PgRefused, with_fix(&why, &fix)))
            }
            LinkClosed::Lost(why) => {
                self.abandon(queue);
                Next::Fail(Failure::new(
                    Kind::PgUnreachable,
                    format!("{what}{} lost: {why}", to_host(pg)),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::wire::testing::{encode_backend, pg_error};
    use crate::wire::BackendMessage;

    fn pg(url: &str) -> PgConnConfig {
        let pairs = [
            ("PG_URL", url),
            ("PG_PUBLICATION", "pub"),
            ("TABLES", "t"),
            ("FELDERA_PIPELINE", "p"),
        ];
        Config::from_pairs(pairs).expect("valid").pg
    }

    /// Every command so far, briefly.
    fn commands(queue: &mut Queue) -> Vec<String> {
        std::iter::from_fn(|| queue.pop())
            .map(|command| match command {
                Command::PgConnect {
                    conn,
                    target,
                    timeout_ms,
                } => format!("{conn} connect {target} timeout={timeout_ms:?}"),
                Command::PgStartTls {
                    conn,
                    server_name,
                    verify,
                    timeout_ms,
                } => format!("{conn} start TLS {server_name} {verify:?} timeout={timeout_ms:?}"),
                Command::PgWrite { conn, bytes } if bytes.len() == 8 && bytes[4] == 0x04 => {
                    format!("{conn} write SSLRequest")
                }
                Command::PgWrite { conn, .. } => format!("{conn} write"),
                Command::PgClose { conn } => format!("{conn} close"),
                Command::Log { message, .. } => format!("log {message}"),
                other => format!("{other:?}"),
            })
            .collect()
    }

    fn open(url: &str) -> (Queue, PgLink) {
        let mut queue = Queue::default();
        let mut link = PgLink::open(&mut queue, &pg(url), true, "test").expect("link");
        link.on_connected(&mut queue);
        (queue, link)
    }

    /// What a link to `url` asks the shell to open, and whether its startup message
    /// sets the server's `tcp_keepalives_idle`.
    fn first_connect(url: &str) -> (PgTarget, bool) {
        let mut queue = Queue::default();
        let link = PgLink::open(&mut queue, &pg(url), true, "test").expect("link");
        let Some(Command::PgConnect { target, .. }) = queue.pop() else {
            panic!("a link starts with PgConnect");
        };
        let mut conn = link.conn;
        let startup = conn.poll_transmit().expect("the startup message is queued");
        let sent = startup
            .windows(b"tcp_keepalives_idle".len())
            .any(|w| w == b"tcp_keepalives_idle");
        (target, sent)
    }

    #[test]
    fn every_tcp_connection_gets_the_keepalive_on_its_socket_and_at_the_server() {
        let (target, sent) = first_connect("postgres://u@db/app?sslmode=disable");
        let expected = PgTarget::Tcp {
            host: "db".into(),
            port: 5432,
            keepalive: Some(crate::config::DEFAULT_KEEPALIVE),
        };
        assert_eq!((target, sent), (expected, true));
        let (target, sent) = first_connect("postgres://u@db/app?sslmode=disable&keepalives=0");
        assert!(
            matches!(
                target,
                PgTarget::Tcp {
                    keepalive: None,
                    ..
                }
            ),
            "{target:?}"
        );
        assert!(!sent, "keepalives=0 sends no server setting");
        let (target, sent) = first_connect("host=/run/pg user=u keepalives_idle=30");
        assert!(matches!(target, PgTarget::Unix { .. }), "{target:?}");
        assert!(!sent, "no keepalive over a Unix socket");
    }

    #[test]
    fn prefer_falls_back_to_a_new_plain_connection_when_the_handshake_fails() {
        let (mut queue, mut link) = open("postgres://u@db/app?connect_timeout=5");
        link.on_bytes(&mut queue, b"S");
        let failure = ConnFailure::new(FailureKind::TlsVerification, "unknown issuer");
        assert_eq!(
            link.on_closed(&mut queue, Some(failure)),
            LinkClosed::Retrying
        );
        link.on_connected(&mut queue);
        assert_eq!(
            commands(&mut queue),
            [
                "pg#1 connect db:5432 timeout=Some(5000)",
                "pg#1 write SSLRequest",
                "pg#1 start TLS db None timeout=Some(5000)",
                "pg#1 close",
                "log pg#1: TLS handshake failed (unknown issuer); trying again in plain text as pg#2 (sslmode=prefer)",
                "pg#2 connect db:5432 timeout=Some(5000)",
                "pg#2 write",
            ]
        );
        assert_eq!(link.id, ConnId(2));
        let lost = ConnFailure::new(FailureKind::Broken, "reset");
        assert_eq!(
            link.on_closed(&mut queue, Some(lost)),
            LinkClosed::Lost("reset".into()),
            "only one retry"
        );
    }

    #[test]
    fn a_refused_certificate_is_fatal_when_tls_is_required() {
        let (mut queue, mut link) =
            open("postgres://u@db/app?sslmode=verify-full&sslrootcert=/ca.pem");
        link.on_bytes(&mut queue, b"S");
        assert!(commands(&mut queue).contains(&"pg#1 start TLS db Full timeout=None".to_owned()));
        let failure = ConnFailure::new(FailureKind::TlsVerification, "name mismatch");
        let LinkClosed::Fatal(why) = link.on_closed(&mut queue, Some(failure)) else {
            panic!("a refused certificate must be fatal");
        };
        assert!(why.contains("name mismatch"), "{why}");
        // A handshake broken for another reason is one lost attempt.
        let (mut queue, mut link) = open("postgres://u@db/app?sslmode=require");
        link.on_bytes(&mut queue, b"S");
        let failure = ConnFailure::new(FailureKind::Tls, "reset during handshake");
        assert!(matches!(
            link.on_closed(&mut queue, Some(failure)),
            LinkClosed::Lost(_)
        ));
    }

    #[test]
    fn allow_retries_with_tls_after_the_server_rejects_plain_text() {
        let (mut queue, mut link) = open("postgres://u@db/app?sslmode=allow");
        let rejection = BackendMessage::ErrorResponse(Box::new(pg_error(
            "FATAL",
            "28000",
            "no pg_hba.conf entry for host, no encryption",
        )));
        let events = link.on_bytes(&mut queue, &encode_backend(&rejection));
        assert!(
            events.is_empty(),
            "the pipeline does not see the first attempt"
        );
        link.on_connected(&mut queue);
        let seen = commands(&mut queue);
        assert_eq!(seen[0], "pg#1 connect db:5432 timeout=None");
        assert_eq!(seen[1], "pg#1 write", "plain startup first");
        assert_eq!(seen[2], "pg#1 close");
        assert!(
            seen[3].contains("trying again with TLS as pg#2"),
            "{}",
            seen[3]
        );
        assert_eq!(
            seen[4..],
            ["pg#2 connect db:5432 timeout=None", "pg#2 write SSLRequest"]
        );
        // The TLS attempt is rejected too: now the pipeline hears of it.
        link.on_bytes(&mut queue, b"S");
        link.on_tls_ready(&mut queue, None);
        let events = link.on_bytes(&mut queue, &encode_backend(&rejection));
        assert!(matches!(&events[..], [Event::Failed(ConnError::Server(_))]));
    }

    #[test]
    fn a_refused_login_says_how_to_fix_it_as_check_does() {
        let pg = pg("postgres://u@db:5433/app");
        let refused = |code: &str, message: &str| {
            let error = ConnError::Server(Box::new(pg_error("FATAL", code, message)));
            let failure = conn_failure(&pg, error);
            assert_eq!(failure.kind, Kind::PgRefused);
            failure.message
        };
        let password = refused("28P01", "password authentication failed for user \"u\"");
        assert_eq!(
            password,
            "PostgreSQL refused the connection: server error: FATAL 28P01: password authentication failed for user \"u\" \
             (fix: check the password of user u (PGPASSWORD, the password file, or PG_URL))"
        );
        // `check` reports the server's words without the prefix: the same fix.
        let check_words =
            "server error: FATAL 28P01: password authentication failed for user \"u\"";
        assert!(password.ends_with(&format!("(fix: {})", connect_fix(&pg, check_words))));
        let hba = refused(
            "28000",
            "no pg_hba.conf entry for replication connection from host \"10.0.0.1\", user \"u\", no encryption",
        );
        assert!(
            hba.ends_with("(fix: check that role u exists and that a pg_hba.conf line admits it to database app from this host \
                 (a replication connection of slotline's is matched by the database's name, not by `replication`), then reload PostgreSQL)"),
            "{hba}"
        );
        let database = refused("3D000", "database \"app\" does not exist");
        assert!(
            database.ends_with("(fix: create database app, or name one that exists in PG_URL)"),
            "{database}"
        );
        let privilege = refused("42501", "permission denied to start WAL sender");
        assert!(
            privilege.ends_with(
                "(fix: ALTER ROLE u REPLICATION (and let pg_hba.conf admit it to database app))"
            ),
            "{privilege}"
        );
        assert_eq!(
            connect_fix(&pg, "connection refused"),
            "check PG_URL (host db, port 5433, database app, user u), the password and pg_hba.conf"
        );
    }

    #[test]
    fn a_unix_socket_directory_is_connected_in_plain_text_whatever_the_mode() {
        let (mut queue, _link) = open("postgres://u@%2Ftmp%2Fpg:5433/app?sslmode=require");
        assert_eq!(
            commands(&mut queue),
            [
                "pg#1 connect /tmp/pg/.s.PGSQL.5433 timeout=None",
                "pg#1 write"
            ]
        );
    }
}
