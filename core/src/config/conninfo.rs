//! PostgreSQL connection settings: `PG_URL` (a `postgres://` URL or a `key=value`
//! conninfo string) or, when it is absent, libpq's `PG*` variables.
//!
//! Messages about `PG_URL` never echo it: it may hold a password. Which files hold the
//! certificates and the password file is decided here; reading them is the shells' job.

use super::input::{ConfigError, Pairs, Secret};
use super::keepalive::{KeepaliveParts, TcpKeepalive};

/// `sslmode` as libpq spells it (docs/guide/configuration.md, "TLS, Unix sockets, the password
/// file, timeouts").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    const NAMES: [(&'static str, SslMode); 6] = [
        ("disable", SslMode::Disable),
        ("allow", SslMode::Allow),
        ("prefer", SslMode::Prefer),
        ("require", SslMode::Require),
        ("verify-ca", SslMode::VerifyCa),
        ("verify-full", SslMode::VerifyFull),
    ];

    fn parse(variable: &str, raw: &str) -> Result<SslMode, ConfigError> {
        named(&Self::NAMES, variable, raw)
    }

    /// The mode as libpq spells it.
    pub fn name(self) -> &'static str {
        name_of(&Self::NAMES, self)
    }
}

/// The value `raw` names in `names` (libpq's spellings), or an error listing them all.
fn named<T: Copy>(names: &[(&str, T)], variable: &str, raw: &str) -> Result<T, ConfigError> {
    names
        .iter()
        .find(|(n, _)| *n == raw)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let all: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
            ConfigError::new(variable, Some(raw), format!("one of {}", all.join(", ")))
        })
}

/// How `names` spells `value`.
fn name_of<T: PartialEq>(names: &[(&'static str, T)], value: T) -> &'static str {
    names
        .iter()
        .find(|(_, v)| *v == value)
        .map_or("?", |(n, _)| n)
}

/// Where the trusted roots for the server's certificate come from (`sslrootcert`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RootCert {
    /// A PEM file of CA certificates.
    File(String),
    /// The platform's trusted roots (`sslrootcert=system`).
    System,
}

/// Where the password file is (`passfile` / `PGPASSFILE`), when one may be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PassFile {
    /// A path given by the user.
    Path(String),
    /// libpq's default, `~/.pgpass` (the shell knows the home directory).
    Default,
}

/// `target_session_attrs` as libpq spells it: which of the hosts a session may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionAttrs {
    /// The first host that accepts the connection.
    Any,
    /// A server that accepts writes (not in recovery, `default_transaction_read_only`
    /// off).
    ReadWrite,
    /// A server that does not (a standby, or read-only by default).
    ReadOnly,
    /// A server not in recovery.
    Primary,
    /// A server in recovery.
    Standby,
    /// A standby if one of the hosts is, else any.
    PreferStandby,
}

impl SessionAttrs {
    const NAMES: [(&'static str, SessionAttrs); 6] = [
        ("any", SessionAttrs::Any),
        ("read-write", SessionAttrs::ReadWrite),
        ("read-only", SessionAttrs::ReadOnly),
        ("primary", SessionAttrs::Primary),
        ("standby", SessionAttrs::Standby),
        ("prefer-standby", SessionAttrs::PreferStandby),
    ];

    fn parse(variable: &str, raw: &str) -> Result<SessionAttrs, ConfigError> {
        named(&Self::NAMES, variable, raw)
    }

    /// The setting as libpq spells it.
    pub fn name(self) -> &'static str {
        name_of(&Self::NAMES, self)
    }

    /// Whether a server in recovery (`in_recovery`) or read-only by default (`read_only`)
    /// serves a session; `standby_seen_none`: a round of every host found no standby
    /// (`prefer-standby` then takes any).
    pub fn accepts(self, in_recovery: bool, read_only: bool, standby_seen_none: bool) -> bool {
        match self {
            SessionAttrs::Any => true,
            SessionAttrs::ReadWrite => !in_recovery && !read_only,
            SessionAttrs::ReadOnly => in_recovery || read_only,
            SessionAttrs::Primary => !in_recovery,
            SessionAttrs::Standby => in_recovery,
            SessionAttrs::PreferStandby => in_recovery || standby_seen_none,
        }
    }
}

/// One of the hosts `PG_URL` (or `PGHOST`) lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PgHost {
    /// A host name or address, or a socket directory.
    pub host: String,
    pub port: u16,
}

/// Where and as whom to connect. `Debug` masks the password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PgConnConfig {
    /// Every host to try, in order (libpq's multi-host list); `host` and `port` are the
    /// one a connection uses (the first unless `at` chose another).
    pub hosts: Vec<PgHost>,
    /// `target_session_attrs`: which of the hosts a session may use.
    pub target_session_attrs: SessionAttrs,
    /// A host name or address, or a directory holding the server's Unix socket (a path
    /// starting with `/`, as libpq).
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: Option<Secret>,
    pub database: String,
    pub sslmode: SslMode,
    pub sslrootcert: Option<RootCert>,
    /// A client certificate (PEM, the chain's leaf first) and its private key.
    pub sslcert: Option<String>,
    pub sslkey: Option<String>,
    /// How long opening a connection (TCP connect, then the TLS handshake) may take;
    /// `None` waits for ever (libpq's default).
    pub connect_timeout_ms: Option<u64>,
    /// The password file to consult when no password is configured.
    pub passfile: Option<PassFile>,
    /// The keepalive of a TCP connection; `None` when `keepalives=0` turns it off (see
    /// [`PgConnConfig::tcp_keepalive`]).
    pub keepalive: Option<TcpKeepalive>,
    /// The settings `PG_URL` set, `None` without a `PG_URL` (messages name the URL for
    /// these, the `PG*` variable for the others).
    pub url_keys: Option<Vec<String>>,
}

/// The settings as written, before validation.
#[derive(Default)]
struct Parts {
    host: Option<String>,
    port: Option<String>,
    user: Option<String>,
    password: Option<String>,
    database: Option<String>,
    sslmode: Option<String>,
    sslrootcert: Option<String>,
    sslcert: Option<String>,
    sslkey: Option<String>,
    connect_timeout: Option<String>,
    passfile: Option<String>,
    target_session_attrs: Option<String>,
    keepalive: KeepaliveParts,
}

/// Each setting's conninfo key and libpq variable.
const SETTINGS: [(&str, &str); 12] = [
    ("host", "PGHOST"),
    ("port", "PGPORT"),
    ("user", "PGUSER"),
    ("password", "PGPASSWORD"),
    ("dbname", "PGDATABASE"),
    ("sslmode", "PGSSLMODE"),
    ("sslrootcert", "PGSSLROOTCERT"),
    ("sslcert", "PGSSLCERT"),
    ("sslkey", "PGSSLKEY"),
    ("connect_timeout", "PGCONNECT_TIMEOUT"),
    ("passfile", "PGPASSFILE"),
    ("target_session_attrs", "PGTARGETSESSIONATTRS"),
];

/// libpq's shortest connect timeout: smaller positive values are raised to it.
const MIN_CONNECT_TIMEOUT_SECS: u64 = 2;

/// What a missing PostgreSQL user is told.
const USER_ACCEPTED: &str =
    "the PostgreSQL user to connect as (by default the OS user, when the process knows it)";

/// The missing-user error, as `(setting, accepted)`, when no setting and no OS user names
/// the PostgreSQL user; `None` otherwise, and when `PG_URL` cannot be read (that error
/// comes later, on its own).
pub(super) fn missing_user(pairs: &Pairs) -> Option<(String, String)> {
    match PgConnConfig::from_pairs(pairs) {
        Err(e) if e.value.is_none() && e.accepted == USER_ACCEPTED => {
            Some((e.variable, e.accepted))
        }
        _ => None,
    }
}

impl PgConnConfig {
    pub(super) fn from_pairs(pairs: &Pairs) -> Result<PgConnConfig, ConfigError> {
        let mut parts = match pairs.get("PG_URL") {
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                from_url_form(url)?
            }
            Some(conninfo) => from_conninfo(conninfo)?,
            None => Parts::default(),
        };
        // As libpq: what PG_URL leaves unset comes from the libpq variables.
        let url_keys: Option<Vec<String>> = pairs.get("PG_URL").map(|_| {
            SETTINGS
                .iter()
                .filter(|(key, _)| parts.field(key).is_some_and(|f| f.is_some()))
                .map(|(key, _)| (*key).to_owned())
                .collect()
        });
        for (key, variable) in SETTINGS {
            if let (Some(field), Some(value)) = (parts.field(key), pairs.get(variable)) {
                if field.is_none() {
                    *field = Some(value.to_owned());
                }
            }
        }
        // Settings other than the password are not secret: their values are shown, named
        // where the user wrote them (`port in PG_URL`, `PGPORT`).
        let name = |key: &str| setting_name(url_keys.as_deref(), key);
        let hosts = hosts_of(parts.host.as_deref(), parts.port.as_deref(), &name)?;
        let target_session_attrs = match parts.target_session_attrs.as_deref() {
            None => SessionAttrs::Any,
            Some(raw) => SessionAttrs::parse(&name("target_session_attrs"), raw)?,
        };
        let user = parts
            .user
            .or_else(|| pairs.os_user().map(str::to_owned))
            .ok_or_else(|| {
                ConfigError::new(
                    &missing_setting_name(url_keys.as_deref(), "user"),
                    None,
                    USER_ACCEPTED,
                )
            })?;
        let sslrootcert = parts.sslrootcert.map(|raw| match raw.as_str() {
            "system" => RootCert::System,
            _ => RootCert::File(raw),
        });
        let sslmode = match parts.sslmode.as_deref() {
            Some(raw) => SslMode::parse(&name("sslmode"), raw)?,
            // libpq: the platform's roots only make sense with the host name checked.
            None if sslrootcert == Some(RootCert::System) => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        check_tls_files(
            url_keys.as_deref(),
            sslmode,
            sslrootcert.as_ref(),
            &parts.sslcert,
            &parts.sslkey,
        )?;
        let connect_timeout_ms = match parts.connect_timeout.as_deref() {
            None => None,
            Some(raw) => connect_timeout_ms(raw).map_err(|accepted| {
                ConfigError::new(&name("connect_timeout"), Some(raw), accepted)
            })?,
        };
        let keepalive = parts.keepalive.resolve()?;
        let passfile = match (&parts.password, parts.passfile) {
            (Some(_), _) => None,
            (None, Some(path)) => Some(PassFile::Path(path)),
            (None, None) => Some(PassFile::Default),
        };
        Ok(PgConnConfig {
            host: hosts[0].host.clone(),
            port: hosts[0].port,
            hosts,
            target_session_attrs,
            database: parts.database.unwrap_or_else(|| user.clone()),
            user,
            password: parts.password.map(Secret::new),
            sslmode,
            sslrootcert,
            sslcert: parts.sslcert,
            sslkey: parts.sslkey,
            connect_timeout_ms,
            passfile,
            keepalive,
            url_keys,
        })
    }

    /// The same settings for the `index`-th host (of `hosts`, wrapping around).
    pub fn at(&self, index: usize) -> PgConnConfig {
        let mut one = self.clone();
        if let Some(host) = self.hosts.get(index % self.hosts.len().max(1)) {
            one.host = host.host.clone();
            one.port = host.port;
        }
        one
    }

    /// How the user spells a setting: `PGSSLCERT`, or `sslcert in PG_URL`.
    pub fn setting_name(&self, key: &str) -> String {
        setting_name(self.url_keys.as_deref(), key)
    }

    /// Whether `host` names a directory holding the server's Unix socket.
    pub fn is_unix_socket(&self) -> bool {
        self.host.starts_with('/')
    }

    /// The keepalive a connection to this server gets, on its socket and as the server's
    /// `tcp_keepalives_*` settings: none over a Unix socket, where it has no meaning.
    pub fn tcp_keepalive(&self) -> Option<TcpKeepalive> {
        self.keepalive.filter(|_| !self.is_unix_socket())
    }

    /// Fills in the password from a password file's contents (libpq's `.pgpass` rules,
    /// see `super::pgpass`), unless one is configured. Returns whether a line matched.
    pub fn apply_passfile(&mut self, contents: &str) -> bool {
        if self.password.is_some() {
            return false;
        }
        // libpq matches Unix-socket connections as host `localhost`.
        let host = if self.is_unix_socket() {
            "localhost"
        } else {
            self.host.as_str()
        };
        let port = self.port.to_string();
        let found = super::pgpass::find(contents, [host, &port, &self.database, &self.user]);
        self.password = found.map(Secret::new);
        self.password.is_some()
    }
}

/// Where a setting was written: `sslcert in PG_URL` when the URL sets it, else its
/// variable (`PGSSLCERT`).
/// libpq's host list: `host` and `port` may each list several values separated by commas;
/// a single port applies to every host, otherwise there is one port per host (an empty one
/// is 5432).
fn hosts_of(
    host: Option<&str>,
    port: Option<&str>,
    name: &dyn Fn(&str) -> String,
) -> Result<Vec<PgHost>, ConfigError> {
    let names: Vec<&str> = match host {
        None => vec!["localhost"],
        Some(raw) => raw.split(',').map(str::trim).collect(),
    };
    if names.iter().any(|h| h.is_empty()) {
        return Err(ConfigError::new(
            &name("host"),
            host,
            "a host name, address or socket directory, or several separated by commas (none empty)",
        ));
    }
    let ports: Vec<&str> = match port {
        None => vec![""],
        Some(raw) => raw.split(',').map(str::trim).collect(),
    };
    if ports.len() != 1 && ports.len() != names.len() {
        return Err(ConfigError::new(
            &name("port"),
            port,
            format!(
                "one port for every host, or one per host ({} host(s) listed)",
                names.len()
            ),
        ));
    }
    let parse = |raw: &str| -> Result<u16, ConfigError> {
        if raw.is_empty() {
            return Ok(5432);
        }
        raw.parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| ConfigError::new(&name("port"), port, "a TCP port from 1 to 65535"))
    };
    names
        .iter()
        .enumerate()
        .map(|(i, host)| {
            Ok(PgHost {
                host: (*host).to_owned(),
                port: parse(ports.get(i).or(ports.first()).copied().unwrap_or(""))?,
            })
        })
        .collect()
}

fn setting_name(url_keys: Option<&[String]>, key: &str) -> String {
    let variable = variable_of(key);
    match url_keys {
        Some(keys) if keys.iter().any(|k| k == key) => format!("{key} in PG_URL"),
        _ => variable,
    }
}

/// Where a missing setting can be written: its variable, and `PG_URL` when one is used.
fn missing_setting_name(url_keys: Option<&[String]>, key: &str) -> String {
    match url_keys {
        Some(_) => format!("{key} (in PG_URL, or {})", variable_of(key)),
        None => variable_of(key),
    }
}

fn variable_of(key: &str) -> String {
    SETTINGS
        .iter()
        .find(|(k, _)| *k == key)
        .map_or_else(|| key.to_owned(), |(_, variable)| (*variable).to_owned())
}

/// libpq's `connect_timeout`: whole seconds, zero or negative for no limit, and positive
/// values below two raised to two.
fn connect_timeout_ms(raw: &str) -> Result<Option<u64>, &'static str> {
    let secs: i64 = raw
        .trim()
        .parse()
        .map_err(|_| "a whole number of seconds (0 waits for ever)")?;
    if secs <= 0 {
        return Ok(None);
    }
    let secs = u64::try_from(secs).unwrap_or(u64::MAX);
    if secs > 86_400 {
        return Err("a whole number of seconds up to 86400 (0 waits for ever)");
    }
    Ok(Some(secs.max(MIN_CONNECT_TIMEOUT_SECS) * 1000))
}

/// What the modes and the certificate settings demand of each other, checked before any
/// file is read.
fn check_tls_files(
    url_keys: Option<&[String]>,
    sslmode: SslMode,
    sslrootcert: Option<&RootCert>,
    sslcert: &Option<String>,
    sslkey: &Option<String>,
) -> Result<(), ConfigError> {
    let name = |key: &str| setting_name(url_keys, key);
    let missing = |key: &str| missing_setting_name(url_keys, key);
    let verifies = matches!(sslmode, SslMode::VerifyCa | SslMode::VerifyFull);
    if verifies && sslrootcert.is_none() {
        return Err(ConfigError::new(
            &missing("sslrootcert"),
            None,
            format!(
                "sslmode={} verifies the server's certificate: give the CA certificates as a PEM file, or `system` for the platform's trusted roots",
                sslmode.name()
            ),
        ));
    }
    if sslrootcert == Some(&RootCert::System) && sslmode != SslMode::VerifyFull {
        return Err(ConfigError::new(
            &name("sslmode"),
            Some(sslmode.name()),
            "verify-full (or unset) with sslrootcert=system: the platform's roots vouch for any public name, so the host name must be checked",
        ));
    }
    match (sslcert, sslkey) {
        (Some(_), None) => Err(ConfigError::new(
            &missing("sslkey"),
            None,
            format!(
                "the private key of the client certificate given in {}",
                name("sslcert")
            ),
        )),
        (None, Some(_)) => Err(ConfigError::new(
            &missing("sslcert"),
            None,
            format!(
                "the client certificate whose key is given in {}",
                name("sslkey")
            ),
        )),
        _ => Ok(()),
    }
}

fn url_error(raw: &str, accepted: &str) -> ConfigError {
    ConfigError::masked("PG_URL", &masked(raw), accepted)
}

/// `PG_URL` as a message may show it: the password of a URL's user info and the value of
/// every `password` parameter replaced by `***`. A conninfo string that cannot be scanned
/// (an unclosed quote) is not shown at all.
pub(crate) fn masked(raw: &str) -> String {
    const HIDDEN: &str = "(not shown: it may contain a password)";
    let lower = raw.to_ascii_lowercase();
    if !(lower.starts_with("postgres://") || lower.starts_with("postgresql://")) {
        return masked_conninfo(raw).unwrap_or_else(|| HIDDEN.to_owned());
    }
    let (head, query) = match raw.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (raw, None),
    };
    let Some((scheme, rest)) = head.split_once("://") else {
        return HIDDEN.to_owned();
    };
    // Everything between the first `:` of the user info and the last `@` is the password
    // (a password may hold a raw `/` or `@`): hide all of it.
    let rest = match rest.rfind('@') {
        Some(at) => match rest[..at].find(':') {
            Some(colon) => format!("{}:***{}", &rest[..colon], &rest[at..]),
            None => rest.to_owned(),
        },
        None => rest.to_owned(),
    };
    let mut shown = format!("{scheme}://{rest}");
    if let Some(query) = query {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                _ => pair.to_owned(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&pairs.join("&"));
    }
    shown
}

/// A `key=value` conninfo string with the value of `password` replaced by `***`; `None`
/// when it cannot be scanned.
fn masked_conninfo(raw: &str) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    loop {
        while let Some(c) = chars.next_if(|c| c.is_whitespace()) {
            out.push(c);
        }
        if chars.peek().is_none() {
            return Some(out);
        }
        let key: String =
            std::iter::from_fn(|| chars.next_if(|c| *c != '=' && !c.is_whitespace())).collect();
        out.push_str(&key);
        while let Some(c) = chars.next_if(|c| c.is_whitespace()) {
            out.push(c);
        }
        if chars.next_if_eq(&'=').is_none() {
            // Not `key=value`: whatever follows may be a password; show nothing more.
            return (chars.peek().is_none()).then_some(out);
        }
        out.push('=');
        while let Some(c) = chars.next_if(|c| c.is_whitespace()) {
            out.push(c);
        }
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            value.push('\'');
            loop {
                match chars.next()? {
                    '\\' => {
                        value.push('\\');
                        value.push(chars.next()?);
                    }
                    '\'' => break,
                    c => value.push(c),
                }
            }
            value.push('\'');
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                value.push(c);
                if c == '\\' {
                    value.push(chars.next()?);
                }
            }
        }
        if key == "password" {
            out.push_str("***");
        } else {
            out.push_str(&value);
        }
    }
}

/// The hosts of a URL's authority (`a:5432,b:5433`), as libpq takes them: the URL with only
/// the first left (for the URL parser, which takes one), and the host and port lists as the
/// conninfo form writes them. `None` with one host.
fn split_url_hosts(raw: &str) -> Option<(String, String, String)> {
    let scheme_end = raw.find("://")? + 3;
    let rest = &raw[scheme_end..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let at = authority.rfind('@').map_or(0, |i| i + 1);
    let list = &authority[at..];
    if !list.contains(',') {
        return None;
    }
    let (mut hosts, mut ports) = (Vec::new(), Vec::new());
    for entry in list.split(',') {
        let (host, port) = match entry.strip_prefix('[') {
            Some(v6) => {
                let (host, after) = v6.split_once(']')?;
                (host, after.strip_prefix(':').unwrap_or(""))
            }
            None => match entry.rsplit_once(':') {
                Some((host, port)) => (host, port),
                None => (entry, ""),
            },
        };
        hosts.push(percent_decode(host)?);
        ports.push(port.to_owned());
    }
    let first = list.split(',').next().unwrap_or_default();
    let url = format!(
        "{}{}{}{}",
        &raw[..scheme_end],
        &authority[..at],
        first,
        &rest[authority_end..]
    );
    Some((url, hosts.join(","), ports.join(",")))
}

fn from_url_form(raw: &str) -> Result<Parts, ConfigError> {
    const SHAPE: &str =
        "postgres://user[:password]@host[:port][,host2[:port2]...]/database[?sslmode=...]";
    let split = split_url_hosts(raw);
    let one = split.as_ref().map_or(raw, |(url, _, _)| url.as_str());
    let url = url::Url::parse(one).map_err(|_| url_error(raw, SHAPE))?;
    let decode = |s: &str| {
        percent_decode(s)
            .ok_or_else(|| url_error(raw, "percent-encoding in PG_URL must decode to UTF-8"))
    };
    let host = match url.host_str().filter(|h| !h.is_empty()) {
        // A socket directory is written percent-encoded: postgres://u@%2Frun%2Fpg/db.
        Some(host) => Some(decode(host.trim_matches(['[', ']']))?),
        None => None,
    };
    let mut parts = Parts {
        host,
        port: url.port().map(|p| p.to_string()),
        user: Some(decode(url.username())?).filter(|u| !u.is_empty()),
        password: url.password().map(decode).transpose()?,
        database: Some(decode(url.path().trim_start_matches('/'))?).filter(|d| !d.is_empty()),
        ..Parts::default()
    };
    if let Some((_, hosts, ports)) = split {
        parts.host = Some(hosts);
        parts.port = Some(ports).filter(|p| p.chars().any(|c| c != ','));
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

impl Parts {
    /// The setting a conninfo key names (`hostaddr` is `host`).
    fn field(&mut self, key: &str) -> Option<&mut Option<String>> {
        Some(match key {
            "host" | "hostaddr" => &mut self.host,
            "port" => &mut self.port,
            "user" => &mut self.user,
            "password" => &mut self.password,
            "dbname" => &mut self.database,
            "sslmode" => &mut self.sslmode,
            "sslrootcert" => &mut self.sslrootcert,
            "sslcert" => &mut self.sslcert,
            "sslkey" => &mut self.sslkey,
            "connect_timeout" => &mut self.connect_timeout,
            "passfile" => &mut self.passfile,
            "target_session_attrs" => &mut self.target_session_attrs,
            "keepalives" => &mut self.keepalive.keepalives,
            "keepalives_idle" => &mut self.keepalive.idle,
            "keepalives_interval" => &mut self.keepalive.interval,
            "keepalives_count" => &mut self.keepalive.count,
            "tcp_user_timeout" => &mut self.keepalive.user_timeout,
            _ => return None,
        })
    }
}

/// The parameters a `PG_URL` may have (`application_name` is accepted and ignored: slotline
/// names its connections itself).
const PG_URL_PARAMETERS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "user",
    "password",
    "dbname",
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "connect_timeout",
    "passfile",
    "target_session_attrs",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
    "application_name",
];

fn set_part(parts: &mut Parts, key: &str, value: String) -> Result<(), ConfigError> {
    let slot = match (key, parts.field(key)) {
        (_, Some(slot)) => slot,
        ("application_name", None) => return Ok(()),
        (other, None) => {
            return Err(ConfigError::unknown_parameter(
                "PG_URL",
                other,
                PG_URL_PARAMETERS,
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
            return Err(url_error(raw, SHAPE));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\\') => value.push(chars.next().ok_or_else(|| url_error(raw, SHAPE))?),
                    Some('\'') => break,
                    Some(c) => value.push(c),
                    None => return Err(url_error(raw, "a quoted value in PG_URL is not closed")),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                value.push(if c == '\\' {
                    chars.next().ok_or_else(|| url_error(raw, SHAPE))?
                } else {
                    c
                });
            }
        }
        set_part(&mut parts, &key, value)?;
    }
}
