//! One PostgreSQL connection as the pipeline sees it: the core's conversation machine plus
//! its connection id, turning machine output into `PgWrite` commands.

use super::ctx::Ctx;
use super::policy::{Failure, FailureKind};
use crate::config::PgConnConfig;
use crate::conn::{ConnError, Connection, ConnectionConfig, Event, Password};
use crate::io::{Command, ConnId};
use crate::wire::StatusUpdate;

#[derive(Debug)]
pub(crate) struct PgLink {
    pub(crate) id: ConnId,
    conn: Connection,
    connected: bool,
    closed: bool,
}

impl PgLink {
    /// Asks the shell for a TCP connection; the startup message waits until it is open.
    pub(crate) fn open(
        ctx: &mut Ctx,
        pg: &PgConnConfig,
        replication: bool,
        application_name: &str,
    ) -> Result<PgLink, String> {
        let conn = Connection::new(ConnectionConfig {
            user: pg.user.clone(),
            database: pg.database.clone(),
            password: pg.password.as_ref().map(|p| Password::new(p.expose())),
            application_name: application_name.to_owned(),
            replication,
        })
        .map_err(|e| e.to_string())?;
        let id = ctx.conn_id();
        ctx.push(Command::PgConnect {
            conn: id,
            host: pg.host.clone(),
            port: pg.port,
            sslmode: pg.sslmode,
        });
        Ok(PgLink {
            id,
            conn,
            connected: false,
            closed: false,
        })
    }

    pub(crate) fn on_connected(&mut self, ctx: &mut Ctx) {
        self.connected = true;
        self.flush(ctx);
    }

    /// Feeds bytes and returns the events they completed, in order.
    pub(crate) fn on_bytes(&mut self, ctx: &mut Ctx, bytes: &[u8]) -> Vec<Event> {
        self.conn.handle_bytes(bytes);
        self.drain(ctx)
    }

    fn drain(&mut self, ctx: &mut Ctx) -> Vec<Event> {
        let mut events = Vec::new();
        while let Some(event) = self.conn.poll_event() {
            events.push(event);
        }
        self.flush(ctx);
        events
    }

    /// Moves whatever the machine wants to send into `PgWrite` commands.
    pub(crate) fn flush(&mut self, ctx: &mut Ctx) {
        if !self.connected || self.closed {
            return;
        }
        while let Some(bytes) = self.conn.poll_transmit() {
            ctx.push(Command::PgWrite {
                conn: self.id,
                bytes,
            });
        }
    }

    pub(crate) fn query(&mut self, ctx: &mut Ctx, sql: &str) -> Result<(), String> {
        self.conn.query(sql).map_err(|e| e.to_string())?;
        self.flush(ctx);
        Ok(())
    }

    pub(crate) fn send_status(
        &mut self,
        ctx: &mut Ctx,
        update: StatusUpdate,
    ) -> Result<(), String> {
        self.conn
            .send_status_update(update)
            .map_err(|e| e.to_string())?;
        self.flush(ctx);
        Ok(())
    }

    pub(crate) fn pause_read(&self, ctx: &mut Ctx) {
        ctx.push(Command::PgPauseRead { conn: self.id });
    }

    pub(crate) fn resume_read(&self, ctx: &mut Ctx) {
        ctx.push(Command::PgResumeRead { conn: self.id });
    }

    /// Ends the stream politely when streaming, then closes. Idempotent.
    pub(crate) fn close(&mut self, ctx: &mut Ctx) {
        if self.closed {
            return;
        }
        let _ = self.conn.finish_stream();
        self.conn.close();
        self.flush(ctx);
        self.closed = true;
        ctx.push(Command::PgClose { conn: self.id });
    }

    /// Forgets the connection without writing anything (it is already gone).
    pub(crate) fn abandon(&mut self, ctx: &mut Ctx) {
        if !self.closed {
            self.closed = true;
            ctx.push(Command::PgClose { conn: self.id });
        }
    }

    pub(crate) fn parameter(&self, name: &str) -> Option<&str> {
        self.conn.parameters().get(name).map(String::as_str)
    }
}

/// What a failed connection means: server errors that no retry can fix (wrong password,
/// unknown role or database, no privilege, an authentication method slotline lacks) refuse;
/// everything else is a connection that may come back.
pub(crate) fn conn_failure(error: ConnError) -> Failure {
    let permanent = match &error {
        ConnError::Server(e) => e.code.starts_with("28") || e.code == "3D000" || e.code == "42501",
        ConnError::UnsupportedAuthentication { .. }
        | ConnError::PasswordRequired { .. }
        | ConnError::Scram(_) => true,
        _ => false,
    };
    if permanent {
        Failure::new(
            FailureKind::PgRefused,
            format!("PostgreSQL refused the connection: {error}"),
        )
    } else {
        Failure::new(
            FailureKind::PgUnreachable,
            format!("replication connection failed: {error}"),
        )
    }
}
