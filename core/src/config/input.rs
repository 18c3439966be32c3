//! The configuration as it is handed in: key/value pairs (empty values unset), the
//! variables slotline reads with their defaults, secrets that are never printed, and the
//! error that names what was wrong and what is accepted.

use std::collections::BTreeMap;
use std::fmt;

/// A secret (password, API key): usable, but never printed by `Debug` or `Display`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret's value, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// A configuration error: the variable, the value it had (secrets masked) and what is
/// accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The variable as the user wrote it (`TABLES`, `sslmode in PG_URL`); the shells
    /// replace variable names by the flags the user gave instead.
    pub variable: String,
    /// The value, `None` when the variable is missing or unknown. A secret's value is never
    /// kept: it reads `(not shown)`.
    pub value: Option<String>,
    pub accepted: String,
    /// `variable` is not an option at all.
    pub unknown: bool,
    /// `variable` names several missing settings.
    pub several: bool,
    /// A parameter inside `variable` that is not one (`sslmod` in `PG_URL`): the error
    /// names it, never the variable's value.
    pub parameter: Option<String>,
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

impl ConfigError {
    /// An invalid value (`value` is `Some`) or a missing variable (`None`). The value of a
    /// secret variable is replaced by `(not shown)`, unless the caller already describes
    /// it without its contents (a text in parentheses, like `(port in PG_URL)`).
    pub(crate) fn new(variable: &str, value: Option<&str>, accepted: impl Into<String>) -> Self {
        let value = value.map(|v| {
            if is_secret(variable) && !v.starts_with('(') {
                "(not shown)".to_owned()
            } else {
                v.to_owned()
            }
        });
        ConfigError {
            variable: variable.to_owned(),
            value,
            accepted: accepted.into(),
            unknown: false,
            several: false,
            parameter: None,
        }
    }

    /// An invalid value of a secret variable, already masked by the caller (a `PG_URL`
    /// with its password replaced by `***`).
    pub(crate) fn masked(variable: &str, masked_value: &str, accepted: impl Into<String>) -> Self {
        ConfigError {
            value: Some(masked_value.to_owned()),
            ..ConfigError::new(variable, None, accepted)
        }
    }

    /// Several required settings are missing (`(variable, accepted)` each): one error
    /// naming them all.
    pub(super) fn missing(list: Vec<(String, String)>) -> Self {
        match list.as_slice() {
            [(variable, accepted)] => ConfigError::new(variable, None, accepted.clone()),
            _ => {
                let names: Vec<&str> = list.iter().map(|(v, _)| v.as_str()).collect();
                let accepted: Vec<String> = list.iter().map(|(v, a)| format!("{v}: {a}")).collect();
                ConfigError {
                    variable: join_and(&names),
                    value: None,
                    accepted: accepted.join("; "),
                    unknown: false,
                    several: true,
                    parameter: None,
                }
            }
        }
    }

    pub(super) fn unknown(variable: &str, accepted: impl Into<String>) -> Self {
        ConfigError {
            unknown: true,
            ..ConfigError::new(variable, None, accepted)
        }
    }

    /// `variable` (a connection string) has a parameter `parameter` that is not one of
    /// `known`: the error names the parameter, the known one it is closest to (a typo) and
    /// every known one, and never the value of `variable`.
    pub(crate) fn unknown_parameter(variable: &str, parameter: &str, known: &[&str]) -> Self {
        let guess = closest(parameter, known)
            .map(|name| format!("did you mean {name}? "))
            .unwrap_or_default();
        ConfigError {
            parameter: Some(parameter.to_owned()),
            ..ConfigError::new(
                variable,
                None,
                format!("{guess}accepted: {}", known.join(", ")),
            )
        }
    }
}

/// The name of `known` that `name` is most likely a typo of: at most two edits away (one
/// for a name of four characters or fewer), ignoring case, and the only one that close.
pub(crate) fn closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    let limit = if name.chars().count() <= 4 { 1 } else { 2 };
    let mut best: Option<(usize, &'a str)> = None;
    let mut tied = false;
    for candidate in known {
        let distance = edit_distance(&name, &candidate.to_ascii_lowercase());
        if distance > limit {
            continue;
        }
        match best {
            Some((nearest, _)) if distance > nearest => {}
            Some((nearest, _)) if distance == nearest => tied = true,
            _ => (best, tied) = (Some((distance, *candidate)), false),
        }
    }
    best.filter(|_| !tied).map(|(_, candidate)| candidate)
}

/// Levenshtein distance in characters (insertions, deletions, substitutions).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != *cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(parameter) = &self.parameter {
            return write!(
                f,
                "{} has an unknown parameter {parameter:?}: {}",
                self.variable, self.accepted
            );
        }
        match &self.value {
            Some(value) => write!(
                f,
                "{}={value:?} is invalid: {}",
                self.variable, self.accepted
            ),
            None if self.unknown => {
                write!(f, "{} is not an option: {}", self.variable, self.accepted)
            }
            None if self.several => {
                write!(f, "{} are required: {}", self.variable, self.accepted)
            }
            None => write!(f, "{} is required: {}", self.variable, self.accepted),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Every variable the configuration reads, with its default where it has one. The shells
/// build their flags from this list.
pub const VARIABLES: &[(&str, Option<&str>)] = &[
    ("PG_URL", None),
    ("PGHOST", None),
    ("PGPORT", None),
    ("PGUSER", None),
    ("PGPASSWORD", None),
    ("PGDATABASE", None),
    ("PGSSLMODE", None),
    ("PGSSLROOTCERT", None),
    ("PGSSLCERT", None),
    ("PGSSLKEY", None),
    ("PGCONNECT_TIMEOUT", None),
    ("PGPASSFILE", None),
    ("PGTARGETSESSIONATTRS", None),
    ("PG_PUBLICATION", None),
    ("PG_SLOT", None),
    ("TABLES", None),
    ("PG_TABLE", None),
    ("FELDERA_TABLE", None),
    ("FELDERA_URL", Some("http://127.0.0.1:8080")),
    ("FELDERA_PIPELINE", None),
    ("FELDERA_API_KEY", None),
    ("FELDERA_CA_CERT", None),
    ("FELDERA_ACK_MODE", Some("completed")),
    ("FELDERA_REQUIRE_PRIMARY_KEY", Some("true")),
    ("FELDERA_COMPLETION_TIMEOUT_MS", Some("60000")),
    ("SNAPSHOT_MODE", Some("initial")),
    ("STATE_DIR", None),
    ("BATCH_MAX_ROWS", Some("10000")),
    ("BATCH_MAX_BYTES", Some("4194304")),
    ("BATCH_LINGER_MS", Some("50")),
    ("MAX_IN_FLIGHT_BATCHES", Some("4")),
    ("FELDERA_TRANSACTIONS", Some("off")),
    ("FELDERA_DURABILITY", Some("auto")),
    ("FELDERA_CHECKPOINT_INTERVAL_SECS", Some("60")),
    ("FELDERA_RESTART", Some("resnapshot")),
    ("SNAPSHOT_WORKERS", Some("4")),
    ("COPY_CHUNK_ROWS", Some("10000")),
    ("RETRACT_PAGE_ROWS", Some("10000")),
    ("QUERY_TIMEOUT_SECS", Some("600")),
    ("NO_PROGRESS_TIMEOUT_SECS", Some("300")),
    ("SHUTDOWN_CONFIRM_MS", Some("5000")),
    ("PROGRESS_INTERVAL_SECS", Some("30")),
    ("LOG_FORMAT", Some("text")),
    ("CRASH_AT", None),
    ("CRASH_AFTER_BATCHES", Some("1")),
    ("METRICS_ADDR", None),
    ("SLOT_WAL_WARN_BYTES", None),
    ("SLOT_CHECK_INTERVAL_MS", Some("10000")),
    ("PG_SLOT_FAILOVER", Some("false")),
];

/// Variables whose values are never echoed in an error.
const SECRET_VARIABLES: &[&str] = &["PGPASSWORD", "FELDERA_API_KEY", "PG_URL"];

/// The pairs handed in, with empty values treated as unset (as an empty environment
/// variable is by most tools).
pub(crate) struct Pairs {
    map: BTreeMap<String, String>,
    /// The OS user the process runs as: libpq's default PostgreSQL user.
    os_user: Option<String>,
}

impl Pairs {
    pub(super) fn new(map: BTreeMap<String, String>, os_user: Option<String>) -> Pairs {
        Pairs { map, os_user }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.map
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub(crate) fn get_or_default(&self, key: &str) -> &str {
        self.get(key).unwrap_or_else(|| {
            VARIABLES
                .iter()
                .find(|(k, _)| *k == key)
                .and_then(|(_, d)| *d)
                .unwrap_or("")
        })
    }

    /// The OS user (see `Defaults`), for the PostgreSQL user no setting names.
    pub(crate) fn os_user(&self) -> Option<&str> {
        self.os_user.as_deref().filter(|u| !u.is_empty())
    }

    pub(super) fn required(&self, key: &str, accepted: &str) -> Result<String, ConfigError> {
        self.get(key)
            .map(str::to_owned)
            .ok_or_else(|| ConfigError::new(key, None, accepted))
    }
}

/// Whether a variable's value may be echoed in messages.
pub fn is_secret(variable: &str) -> bool {
    SECRET_VARIABLES.contains(&variable)
}
