//! PostgreSQL connection settings: `PG_URL` (a `postgres://` URL or a `key=value`
//! conninfo string) or, when it is absent, libpq's `PG*` variables.
//!
//! Messages about `PG_URL` never echo it: it may hold a password.

use super::{ConfigError, Pairs, Secret};

/// `sslmode` as libpq spells it. The shells decide how to honour it (TLS is theirs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    const NAMES: [(&'static str, SslMode); 5] = [
        ("disable", SslMode::Disable),
        ("prefer", SslMode::Prefer),
        ("require", SslMode::Require),
        ("verify-ca", SslMode::VerifyCa),
        ("verify-full", SslMode::VerifyFull),
    ];

    fn parse(variable: &str, raw: &str) -> Result<SslMode, ConfigError> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == raw)
            .map(|(_, m)| *m)
            .ok_or_else(|| {
                ConfigError::new(
                    variable,
                    Some(raw),
                    "one of disable, prefer, require, verify-ca, verify-full",
                )
            })
    }
}

/// Where and as whom to connect. `Debug` masks the password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PgConnConfig {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: Option<Secret>,
    pub database: String,
    pub sslmode: SslMode,
}

#[derive(Default)]
struct Parts {
    host: Option<String>,
    port: Option<String>,
    user: Option<String>,
    password: Option<String>,
    database: Option<String>,
    sslmode: Option<String>,
}

impl PgConnConfig {
    pub(super) fn from_pairs(pairs: &Pairs) -> Result<PgConnConfig, ConfigError> {
        let (parts, origin) = match pairs.get("PG_URL") {
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                (from_url(url)?, "PG_URL")
            }
            Some(conninfo) => (from_conninfo(conninfo)?, "PG_URL"),
            None => (
                Parts {
                    host: pairs.get("PGHOST").map(str::to_owned),
                    port: pairs.get("PGPORT").map(str::to_owned),
                    user: pairs.get("PGUSER").map(str::to_owned),
                    password: pairs.get("PGPASSWORD").map(str::to_owned),
                    database: pairs.get("PGDATABASE").map(str::to_owned),
                    sslmode: pairs.get("PGSSLMODE").map(str::to_owned),
                },
                "PG*",
            ),
        };
        let port_var = if origin == "PG_URL" {
            "PG_URL"
        } else {
            "PGPORT"
        };
        let port = match parts.port.as_deref() {
            None => 5432,
            Some(raw) => raw.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                let shown = if origin == "PG_URL" {
                    "(port in PG_URL)"
                } else {
                    raw
                };
                ConfigError::new(port_var, Some(shown), "a TCP port from 1 to 65535")
            })?,
        };
        let user = parts.user.ok_or_else(|| {
            ConfigError::new(
                if origin == "PG_URL" {
                    "PG_URL"
                } else {
                    "PGUSER"
                },
                None,
                "a user name (in PG_URL, or PGUSER)",
            )
        })?;
        let sslmode_var = if origin == "PG_URL" {
            "PG_URL sslmode"
        } else {
            "PGSSLMODE"
        };
        Ok(PgConnConfig {
            host: parts.host.unwrap_or_else(|| "localhost".to_owned()),
            port,
            database: parts.database.unwrap_or_else(|| user.clone()),
            user,
            password: parts.password.map(Secret::new),
            sslmode: SslMode::parse(sslmode_var, parts.sslmode.as_deref().unwrap_or("prefer"))?,
        })
    }
}

fn url_error(accepted: &str) -> ConfigError {
    ConfigError::new(
        "PG_URL",
        Some("(not shown: it may contain a password)"),
        accepted,
    )
}

fn from_url(raw: &str) -> Result<Parts, ConfigError> {
    const SHAPE: &str =
        "postgres://user[:password]@host[:port]/database[?sslmode=...] with one host";
    let url = url::Url::parse(raw).map_err(|_| url_error(SHAPE))?;
    let decode = |s: &str| {
        percent_decode(s)
            .ok_or_else(|| url_error("percent-encoding in PG_URL must decode to UTF-8"))
    };
    let mut parts = Parts {
        host: url
            .host_str()
            .filter(|h| !h.is_empty())
            .map(|h| h.trim_matches(['[', ']']).to_owned()),
        port: url.port().map(|p| p.to_string()),
        user: Some(decode(url.username())?).filter(|u| !u.is_empty()),
        password: url.password().map(decode).transpose()?,
        database: Some(decode(url.path().trim_start_matches('/'))?).filter(|d| !d.is_empty()),
        sslmode: None,
    };
    if raw.contains(',') && parts.host.as_deref().is_some_and(|h| h.contains(',')) {
        return Err(url_error(SHAPE));
    }
    for (key, value) in url.query_pairs() {
        set_part(&mut parts, &key, value.into_owned())?;
    }
    Ok(parts)
}

fn percent_decode(s: &str) -> Option<String> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .ok()
        .map(|d| d.into_owned())
}

fn set_part(parts: &mut Parts, key: &str, value: String) -> Result<(), ConfigError> {
    let slot = match key {
        "host" | "hostaddr" => &mut parts.host,
        "port" => &mut parts.port,
        "user" => &mut parts.user,
        "password" => &mut parts.password,
        "dbname" => &mut parts.database,
        "sslmode" => &mut parts.sslmode,
        "application_name" | "connect_timeout" => return Ok(()),
        other => {
            return Err(ConfigError::new(
                "PG_URL",
                Some(&format!("(parameter {other:?})")),
                "parameters host, hostaddr, port, user, password, dbname, sslmode, application_name, connect_timeout",
            ))
        }
    };
    *slot = Some(value);
    Ok(())
}

/// libpq's `key=value` form: values may be single-quoted, with `\'` and `\\` escapes.
fn from_conninfo(raw: &str) -> Result<Parts, ConfigError> {
    const SHAPE: &str =
        "a postgres:// URL or key=value pairs like `host=db port=5432 user=u dbname=d`";
    let mut parts = Parts::default();
    let mut chars = raw.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(parts);
        }
        let key: String =
            std::iter::from_fn(|| chars.next_if(|c| *c != '=' && !c.is_whitespace())).collect();
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') || key.is_empty() {
            return Err(url_error(SHAPE));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\\') => value.push(chars.next().ok_or_else(|| url_error(SHAPE))?),
                    Some('\'') => break,
                    Some(c) => value.push(c),
                    None => return Err(url_error("a quoted value in PG_URL is not closed")),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                value.push(if c == '\\' {
                    chars.next().ok_or_else(|| url_error(SHAPE))?
                } else {
                    c
                });
            }
        }
        set_part(&mut parts, &key, value)?;
    }
}
