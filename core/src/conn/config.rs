//! Who a connection logs in as: the settings a [`Connection`](super::Connection) starts with.

use crate::config::TcpKeepalive;
use std::fmt;

/// A password. Its `Debug` never prints it, so configs and states can be logged.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    pub fn new(secret: impl Into<String>) -> Self {
        Password(secret.into())
    }

    /// The secret itself, for the authentication exchange only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

/// Whether a connection asks the server for TLS before its startup message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encryption {
    /// The startup message goes out at once, in plain text.
    Plain,
    /// SSLRequest first. When the server answers `N`: stop if `required`, otherwise go on
    /// in plain text on the same connection.
    Request { required: bool },
}

/// Identity and session kind of one PostgreSQL connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectionConfig {
    pub user: String,
    pub database: String,
    /// Needed unless the server trusts the client.
    pub password: Option<Password>,
    /// Shown in `pg_stat_activity` and `pg_stat_replication`.
    pub application_name: String,
    /// A logical replication connection (`replication=database`).
    pub replication: bool,
    pub encryption: Encryption,
    /// The keepalive of the connection's TCP socket, sent as the server's
    /// `tcp_keepalives_*` settings so it probes too; `None` sends none (a Unix socket, or
    /// `keepalives=0`).
    pub keepalive: Option<TcpKeepalive>,
}

impl ConnectionConfig {
    /// Refuses what cannot go on the wire: NUL bytes end C strings in the protocol.
    pub(crate) fn validate(&self) -> Result<(), String> {
        let fields = [
            ("user", self.user.as_str()),
            ("database", self.database.as_str()),
            ("application_name", self.application_name.as_str()),
            (
                "password",
                self.password.as_ref().map_or("", |p| p.expose()),
            ),
        ];
        for (name, value) in fields {
            if value.contains('\0') {
                return Err(format!("{name} contains a NUL byte"));
            }
        }
        if self.user.is_empty() {
            return Err("user is empty".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_prints_the_password() {
        let config = ConnectionConfig {
            user: "u".into(),
            database: "d".into(),
            password: Some(Password::new("hunter2")),
            application_name: "slotline".into(),
            replication: false,
            encryption: Encryption::Plain,
            keepalive: None,
        };
        let printed = format!("{config:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("<redacted>"), "{printed}");
    }

    #[test]
    fn nul_bytes_and_empty_user_are_refused() {
        let mut config = ConnectionConfig {
            user: "u".into(),
            database: "d".into(),
            password: Some(Password::new("a\0b")),
            application_name: "s".into(),
            replication: true,
            encryption: Encryption::Plain,
            keepalive: None,
        };
        assert_eq!(
            config.validate().unwrap_err(),
            "password contains a NUL byte"
        );
        config.password = None;
        assert!(config.validate().is_ok());
        config.user.clear();
        assert_eq!(config.validate().unwrap_err(), "user is empty");
    }
}
