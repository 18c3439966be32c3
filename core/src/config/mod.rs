//! slotline's configuration: every option (docs/guide/configuration.md, "Options"), parsed and
//! validated from key/value pairs.
//!
//! The shells collect the pairs (flags and environment variables, with the variable names as
//! keys) and hand them in; this module never reads the environment itself. Validation
//! happens here, once, before any side effect: every error names the variable, the value it
//! had and what is accepted, and the shells turn it into exit code 2.

mod conninfo;
mod input;
mod keepalive;
mod parse;
mod pgpass;

use std::collections::BTreeMap;

pub use conninfo::{PassFile, PgConnConfig, PgHost, RootCert, SessionAttrs, SslMode};
pub(crate) use input::Pairs;
pub use input::{is_secret, ConfigError, Secret, VARIABLES};
pub use keepalive::{
    TcpKeepalive, DEFAULT_COUNT, DEFAULT_IDLE_SECS, DEFAULT_INTERVAL_SECS, DEFAULT_KEEPALIVE,
};
use parse::{parse_bool, parse_enum, parse_u64_capped, parse_u64_in};

/// Records one Feldera HTTP ingress endpoint queues before it pauses (stops reading the
/// request body until the circuit took them); a request still unread when the manager's
/// 30 s proxy timeout passes answers 503 with part of its body taken. A batch carries at
/// most `BATCH_MAX_ROWS` records for one table, so that is the cap (docs/feldera.md,
/// "Ingress").
pub const FELDERA_INGRESS_MAX_QUEUED_RECORDS: u64 = 100_000;

/// Records the batches in flight of one phase may carry at most
/// (`MAX_IN_FLIGHT_BATCHES` × `BATCH_MAX_ROWS`, when more than one batch may be in flight):
/// half an ingress endpoint's queue, so that a window on top of what an ended session's
/// requests left queued for the same table still fits, and load alone never pauses the
/// endpoint into the manager's 30 s give-up (docs/feldera.md, "Ingress").
pub const MAX_IN_FLIGHT_RECORDS: u64 = FELDERA_INGRESS_MAX_QUEUED_RECORDS / 2;

const BATCH_MAX_ROWS_WHY: &str = "Feldera pauses an ingress endpoint holding 100000 queued \
     records, so a larger batch can stall half-read until Feldera's manager answers 503 after \
     30 s with part of it taken";

/// When a batch counts as durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckMode {
    /// Feldera's `completion_status` says `complete` (the safe default).
    Completed,
    /// HTTP 200 from ingress (unsafe: kept to demonstrate the loss).
    Accepted,
}

/// Which batches go into a Feldera transaction (`FELDERA_TRANSACTIONS`), so that views
/// see a source transaction whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FelderaTransactions {
    /// Never: a source transaction larger than one batch becomes visible in pieces.
    Off,
    /// A source transaction that spans more than one batch.
    Large,
    /// Every batch.
    All,
}

/// What a batch must reach in Feldera before its changes are acknowledged to PostgreSQL
/// (`FELDERA_DURABILITY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FelderaDurability {
    /// `Checkpoint` when the pipeline's fault tolerance brings it back from its last
    /// checkpoint after a restart, `Completion` when it has none.
    Auto,
    /// A successful Feldera checkpoint taken after the batch completed: what survives a
    /// restart of the pipeline.
    Checkpoint,
    /// Feldera's completion (processed and written to every output, not stored): a restart
    /// of a pipeline without fault tolerance empties it, and slotline seeds it again
    /// (`FELDERA_RESTART`).
    Completion,
}

/// What slotline does when the pipeline restarted without fault tolerance, its tables
/// empty (`FELDERA_RESTART`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FelderaRestart {
    /// Seed it again: a new snapshot of every table, then streaming.
    Resnapshot,
    /// Exit, for an operator to decide.
    Exit,
}

/// How the target is seeded before streaming.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotMode {
    Initial,
    Never,
    Inconsistent,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// The named boundaries where a test may crash the process (docs/contract.md, "Crash points").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CrashPoint {
    BeforeSend,
    AfterSend,
    AfterComplete,
    AfterAck,
    SnapshotAfterSlot,
    SnapshotMidCopy,
    SnapshotBeforeComplete,
    RetractAfterQuery,
    RetractMidDelete,
}

impl CrashPoint {
    pub const ALL: [(CrashPoint, &'static str); 9] = [
        (CrashPoint::BeforeSend, "before_send"),
        (CrashPoint::AfterSend, "after_send"),
        (CrashPoint::AfterComplete, "after_complete"),
        (CrashPoint::AfterAck, "after_ack"),
        (CrashPoint::SnapshotAfterSlot, "snapshot_after_slot"),
        (CrashPoint::SnapshotMidCopy, "snapshot_mid_copy"),
        (
            CrashPoint::SnapshotBeforeComplete,
            "snapshot_before_complete",
        ),
        (CrashPoint::RetractAfterQuery, "retract_after_query"),
        (CrashPoint::RetractMidDelete, "retract_mid_delete"),
    ];

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(p, _)| *p == self)
            .map_or("?", |(_, n)| n)
    }
}

/// `CRASH_AT` with `CRASH_AFTER_BATCHES`: exit 70 the N-th time `point` is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashSpec {
    pub point: CrashPoint,
    pub after: u64,
}

/// Which tables go where, as written by the user; `contract::routes` parses and checks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TablesSpec {
    /// `TABLES=users,items` or `users:USERS,public.items:lineitems`.
    List(String),
    /// `PG_TABLE` with an optional `FELDERA_TABLE` (defaults to the PostgreSQL name).
    Single {
        pg_table: String,
        feldera_table: Option<String>,
    },
}

/// Every option (docs/guide/configuration.md, "Options"), validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub pg: PgConnConfig,
    pub publication: String,
    pub slot: String,
    pub tables: TablesSpec,
    pub feldera_url: String,
    pub feldera_pipeline: String,
    pub feldera_api_key: Option<Secret>,
    /// A PEM file of the CA certificates that vouch for an `https://` Feldera (instead of
    /// the built-in public roots).
    pub feldera_ca_cert: Option<String>,
    pub ack_mode: AckMode,
    pub require_primary_key: bool,
    pub completion_timeout_ms: u64,
    pub snapshot_mode: SnapshotMode,
    /// Where `<slot>.state.json` lives: `STATE_DIR` (made absolute against the working
    /// directory), else the shell's default (`Defaults::state_dir`).
    pub state_dir: String,
    /// `STATE_DIR` was set: the directory is the operator's choice, not a default. A slot
    /// without a state file in a default directory is refused rather than copied again
    /// (docs/snapshot.md, "The state file").
    pub state_dir_given: bool,
    pub batch_max_rows: u64,
    pub batch_max_bytes: u64,
    pub batch_linger_ms: u64,
    /// `MAX_IN_FLIGHT_BATCHES`: batches sent and not yet durable at once.
    pub max_in_flight_batches: usize,
    /// `FELDERA_TRANSACTIONS`.
    pub feldera_transactions: FelderaTransactions,
    /// `FELDERA_DURABILITY`.
    pub feldera_durability: FelderaDurability,
    /// `FELDERA_CHECKPOINT_INTERVAL_SECS`: how often checkpoint durability asks Feldera for
    /// a checkpoint.
    pub feldera_checkpoint_interval_secs: u64,
    /// `FELDERA_RESTART`.
    pub feldera_restart: FelderaRestart,
    /// `SNAPSHOT_WORKERS`: connections copying in parallel (never more than the work).
    pub snapshot_workers: usize,
    /// `COPY_CHUNK_ROWS`: rows an online copy reads in one chunk (docs/online-copy.md).
    pub copy_chunk_rows: u64,
    /// `RETRACT_PAGE_ROWS`: keys of a re-snapshot's leftover check asked about in one
    /// PostgreSQL question.
    pub retract_page_rows: u32,
    /// `QUERY_TIMEOUT_SECS`: how long an ad-hoc query of Feldera may take (a table scan
    /// included), apart from the completion poll's timeout.
    pub query_timeout_secs: u64,
    pub no_progress_timeout_secs: u64,
    pub shutdown_confirm_ms: u64,
    /// `PROGRESS_INTERVAL_SECS`: how often the progress line may be logged (0: never).
    pub progress_interval_secs: u64,
    pub log_format: LogFormat,
    pub crash: Option<CrashSpec>,
    /// `METRICS_ADDR`: where the shell serves `/metrics`, `/healthz` and `/readyz`
    /// (`host:port`; `None`: no metrics server).
    pub metrics_addr: Option<String>,
    /// `SLOT_WAL_WARN_BYTES`: warn when the slot retains more WAL than this.
    pub slot_wal_warn_bytes: Option<u64>,
    /// `SLOT_CHECK_INTERVAL_MS`: how often the slot is sampled while running (0: never).
    pub slot_check_interval_ms: u64,
    /// `PG_SLOT_FAILOVER`: create the slot as a failover slot (PostgreSQL 17+).
    pub slot_failover: bool,
}

/// What a configuration is for: a run and `check` need the routes and the publication;
/// `status` and `drop-slot` (retiring a connector) only the connection and the slot, named
/// by `PG_SLOT` or derived from `FELDERA_PIPELINE`; `ddl` the connection and the tables,
/// from `TABLES` or else from the publication `PG_PUBLICATION`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    Run,
    SlotOperation,
    Ddl,
}

/// What the process knows that the pairs do not (the shell fills it in).
#[derive(Clone, Debug, Default)]
pub struct Defaults {
    /// The OS user the process runs as: the PostgreSQL user when no setting names one, as
    /// libpq does.
    pub os_user: Option<String>,
    /// The state directory when `STATE_DIR` is not set: an absolute path that a service
    /// and a person running slotline by hand share (docs/guide/configuration.md, "Options");
    /// `None`: the process has none, and a run or a slot operation needs `STATE_DIR`.
    pub state_dir: Option<String>,
    /// The working directory, to make a relative `STATE_DIR` absolute (`None`: kept as
    /// given).
    pub working_dir: Option<String>,
}

/// The default state directory of `Config::from_pairs` (tests, examples, the fuzzer).
pub const DETACHED_STATE_DIR: &str = "./slotline-state";

impl Defaults {
    /// For a caller with no process to ask (tests, examples, the fuzzer): no OS user, no
    /// working directory, and `DETACHED_STATE_DIR` as the default state directory.
    pub fn detached() -> Defaults {
        Defaults {
            os_user: None,
            state_dir: Some(DETACHED_STATE_DIR.to_owned()),
            working_dir: None,
        }
    }
}

const STATE_DIR_ACCEPTED: &str = "a directory this process may write, kept across restarts \
     (this process has no default: XDG_STATE_HOME and HOME are unset and /var/lib/slotline is \
     not writable)";

/// `STATE_DIR` as given (absolute against `working_dir` when relative), else the default.
fn state_dir(pairs: &Pairs, defaults: &Defaults) -> Option<String> {
    match pairs.get("STATE_DIR") {
        Some(dir) if dir.starts_with('/') => Some(dir.to_owned()),
        Some(dir) => Some(match &defaults.working_dir {
            Some(cwd) => {
                let relative = dir.trim_start_matches("./");
                let relative = if relative == "." { "" } else { relative };
                match (cwd.trim_end_matches('/'), relative) {
                    ("", r) => format!("/{r}"),
                    (c, "") => c.to_owned(),
                    (c, r) => format!("{c}/{r}"),
                }
            }
            None => dir.to_owned(),
        }),
        None => defaults.state_dir.clone(),
    }
}

const PIPELINE_ACCEPTED: &str = "the name of the Feldera pipeline to feed";
const PUBLICATION_ACCEPTED: &str = "the name of an existing publication";
const TABLES_ACCEPTED: &str = "a list like `users,items` or `users:people,public.items:lineitems` (or PG_TABLE with an optional FELDERA_TABLE)";

impl Config {
    /// Parses and validates the configuration of a run (or `check`) with
    /// `Defaults::detached()`. Unknown keys are refused (a typo must not silently fall back
    /// to a default).
    pub fn from_pairs<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Result<Config, ConfigError>
    where
        K: Into<String>,
        V: Into<String>,
    {
        Config::from_pairs_for(pairs, Purpose::Run, &Defaults::detached())
    }

    /// Parses and validates the configuration for `purpose`. Every required setting that
    /// is missing is named in one error, so one round of fixes suffices. For a
    /// `SlotOperation`, `PG_PUBLICATION` and `TABLES` may be absent (they are then empty and
    /// unused), and so may `FELDERA_PIPELINE` when `PG_SLOT` names the slot (it is then
    /// empty and Feldera is not asked).
    pub fn from_pairs_for<K, V>(
        pairs: impl IntoIterator<Item = (K, V)>,
        purpose: Purpose,
        defaults: &Defaults,
    ) -> Result<Config, ConfigError>
    where
        K: Into<String>,
        V: Into<String>,
    {
        let mut map = BTreeMap::new();
        for (key, value) in pairs {
            let key = key.into();
            if !VARIABLES.iter().any(|(k, _)| *k == key) {
                let known: Vec<&str> = VARIABLES.iter().map(|(k, _)| *k).collect();
                return Err(ConfigError::unknown(
                    &key,
                    format!("known options: {}", known.join(", ")),
                ));
            }
            map.insert(key, value.into());
        }
        let pairs = Pairs::new(map, defaults.os_user.clone());
        let run = purpose == Purpose::Run;
        let ddl = purpose == Purpose::Ddl;
        let mut missing = Vec::new();
        if pairs.get("FELDERA_PIPELINE").is_none()
            && !ddl
            && (run || pairs.get("PG_SLOT").is_none())
        {
            let accepted = match run {
                true => PIPELINE_ACCEPTED,
                false => "the name of the Feldera pipeline (or PG_SLOT, the slot's name)",
            };
            missing.push(("FELDERA_PIPELINE".to_owned(), accepted.to_owned()));
        }
        if run && pairs.get("PG_PUBLICATION").is_none() {
            missing.push(("PG_PUBLICATION".to_owned(), PUBLICATION_ACCEPTED.to_owned()));
        }
        let no_tables = ["TABLES", "PG_TABLE", "FELDERA_TABLE"]
            .iter()
            .all(|k| pairs.get(k).is_none());
        if run && no_tables {
            missing.push(("TABLES".to_owned(), TABLES_ACCEPTED.to_owned()));
        }
        if ddl && no_tables && pairs.get("PG_PUBLICATION").is_none() {
            missing.push((
                "TABLES".to_owned(),
                format!("{TABLES_ACCEPTED}, or PG_PUBLICATION to describe the tables it publishes"),
            ));
        }
        if let Some(user) = conninfo::missing_user(&pairs) {
            missing.push(user);
        }
        let state_dir = state_dir(&pairs, defaults);
        if state_dir.is_none() && !ddl {
            missing.push(("STATE_DIR".to_owned(), STATE_DIR_ACCEPTED.to_owned()));
        }
        if !missing.is_empty() {
            return Err(ConfigError::missing(missing));
        }
        let feldera_pipeline = match run {
            true => pairs.required("FELDERA_PIPELINE", PIPELINE_ACCEPTED)?,
            false => pairs.get("FELDERA_PIPELINE").unwrap_or_default().to_owned(),
        };
        let slot = match pairs.get("PG_SLOT") {
            Some(slot) => parse::slot_name("PG_SLOT", slot)?.to_owned(),
            None => parse::default_slot_name(&feldera_pipeline),
        };
        let ack_mode = parse_enum(
            &pairs,
            "FELDERA_ACK_MODE",
            &[
                ("completed", AckMode::Completed),
                ("accepted", AckMode::Accepted),
            ],
        )?;
        let feldera_durability = parse_enum(
            &pairs,
            "FELDERA_DURABILITY",
            &[
                ("auto", FelderaDurability::Auto),
                ("checkpoint", FelderaDurability::Checkpoint),
                ("completion", FelderaDurability::Completion),
            ],
        )?;
        if (ack_mode, feldera_durability) == (AckMode::Accepted, FelderaDurability::Checkpoint) {
            return Err(ConfigError::new(
                "FELDERA_DURABILITY",
                Some(pairs.get_or_default("FELDERA_DURABILITY")),
                "not checkpoint together with FELDERA_ACK_MODE=accepted: that acknowledges \
                 what Feldera only accepted, and a checkpoint cannot hold what was not \
                 processed yet; use FELDERA_ACK_MODE=completed, or FELDERA_DURABILITY=auto or \
                 completion",
            ));
        }
        let batch_max_rows = parse_u64_capped(
            &pairs,
            "BATCH_MAX_ROWS",
            1,
            FELDERA_INGRESS_MAX_QUEUED_RECORDS,
            BATCH_MAX_ROWS_WHY,
        )?;
        let max_in_flight_batches = parse_u64_in(&pairs, "MAX_IN_FLIGHT_BATCHES", 1, 64)?;
        // One batch alone is bounded by BATCH_MAX_ROWS's own limit.
        if max_in_flight_batches > 1
            && max_in_flight_batches * batch_max_rows > MAX_IN_FLIGHT_RECORDS
        {
            return Err(ConfigError::new(
                "MAX_IN_FLIGHT_BATCHES",
                Some(pairs.get_or_default("MAX_IN_FLIGHT_BATCHES")),
                format!(
                    "at most {} with BATCH_MAX_ROWS={batch_max_rows}: the batches in flight would carry up to {} records \
                     for one table, and Feldera pauses an ingress endpoint holding {FELDERA_INGRESS_MAX_QUEUED_RECORDS} queued \
                     records, some of which an ended session's requests may have left, until its manager answers 503 \
                     after 30 s; keep MAX_IN_FLIGHT_BATCHES x BATCH_MAX_ROWS at or below {MAX_IN_FLIGHT_RECORDS}",
                    (MAX_IN_FLIGHT_RECORDS / batch_max_rows).max(1),
                    max_in_flight_batches * batch_max_rows
                ),
            ));
        }
        Ok(Config {
            pg: PgConnConfig::from_pairs(&pairs)?,
            publication: match run {
                true => pairs.required("PG_PUBLICATION", PUBLICATION_ACCEPTED)?,
                false => pairs.get("PG_PUBLICATION").unwrap_or_default().to_owned(),
            },
            slot,
            tables: match (run, no_tables) {
                // Absent for an operation that needs none, or for `ddl` (the publication's).
                (false, true) => TablesSpec::List(String::new()),
                _ => tables_spec(&pairs)?,
            },
            feldera_url: parse::http_url("FELDERA_URL", pairs.get_or_default("FELDERA_URL"))?,
            feldera_pipeline,
            feldera_api_key: pairs.get("FELDERA_API_KEY").map(Secret::new),
            feldera_ca_cert: pairs.get("FELDERA_CA_CERT").map(str::to_owned),
            ack_mode,
            require_primary_key: parse_bool(&pairs, "FELDERA_REQUIRE_PRIMARY_KEY")?,
            completion_timeout_ms: parse_u64_in(
                &pairs,
                "FELDERA_COMPLETION_TIMEOUT_MS",
                100,
                86_400_000,
            )?,
            snapshot_mode: parse_enum(
                &pairs,
                "SNAPSHOT_MODE",
                &[
                    ("initial", SnapshotMode::Initial),
                    ("never", SnapshotMode::Never),
                    ("inconsistent", SnapshotMode::Inconsistent),
                ],
            )?,
            state_dir: state_dir.unwrap_or_default(),
            state_dir_given: pairs.get("STATE_DIR").is_some(),
            batch_max_rows,
            batch_max_bytes: parse_u64_in(&pairs, "BATCH_MAX_BYTES", 1024, 1 << 30)?,
            batch_linger_ms: parse_u64_in(&pairs, "BATCH_LINGER_MS", 0, 3_600_000)?,
            max_in_flight_batches: max_in_flight_batches as usize,
            feldera_transactions: parse_enum(
                &pairs,
                "FELDERA_TRANSACTIONS",
                &[
                    ("off", FelderaTransactions::Off),
                    ("large", FelderaTransactions::Large),
                    ("all", FelderaTransactions::All),
                ],
            )?,
            feldera_durability,
            feldera_checkpoint_interval_secs: parse_u64_in(
                &pairs,
                "FELDERA_CHECKPOINT_INTERVAL_SECS",
                1,
                3_600,
            )?,
            feldera_restart: parse_enum(
                &pairs,
                "FELDERA_RESTART",
                &[
                    ("resnapshot", FelderaRestart::Resnapshot),
                    ("exit", FelderaRestart::Exit),
                ],
            )?,
            snapshot_workers: parse_u64_in(&pairs, "SNAPSHOT_WORKERS", 1, 64)? as usize,
            copy_chunk_rows: parse_u64_in(&pairs, "COPY_CHUNK_ROWS", 1, 1_000_000)?,
            retract_page_rows: parse_u64_in(&pairs, "RETRACT_PAGE_ROWS", 1, 1_000_000)? as u32,
            query_timeout_secs: parse_u64_in(&pairs, "QUERY_TIMEOUT_SECS", 1, 86_400)?,
            no_progress_timeout_secs: parse_u64_in(
                &pairs,
                "NO_PROGRESS_TIMEOUT_SECS",
                1,
                31_536_000,
            )?,
            shutdown_confirm_ms: parse_u64_in(&pairs, "SHUTDOWN_CONFIRM_MS", 0, 600_000)?,
            progress_interval_secs: parse_u64_in(&pairs, "PROGRESS_INTERVAL_SECS", 0, 86_400)?,
            log_format: parse_enum(
                &pairs,
                "LOG_FORMAT",
                &[("text", LogFormat::Text), ("json", LogFormat::Json)],
            )?,
            crash: crash_spec(&pairs)?,
            metrics_addr: pairs
                .get("METRICS_ADDR")
                .map(|raw| parse::socket_address("METRICS_ADDR", raw))
                .transpose()?,
            slot_wal_warn_bytes: match pairs.get("SLOT_WAL_WARN_BYTES") {
                None => None,
                Some(_) => Some(parse_u64_in(&pairs, "SLOT_WAL_WARN_BYTES", 1, u64::MAX)?),
            },
            slot_check_interval_ms: parse::interval_ms(&pairs, "SLOT_CHECK_INTERVAL_MS")?,
            slot_failover: parse_bool(&pairs, "PG_SLOT_FAILOVER")?,
        })
    }
}

fn tables_spec(pairs: &Pairs) -> Result<TablesSpec, ConfigError> {
    match (
        pairs.get("TABLES"),
        pairs.get("PG_TABLE"),
        pairs.get("FELDERA_TABLE"),
    ) {
        (Some(list), None, None) => Ok(TablesSpec::List(list.to_owned())),
        (None, Some(pg_table), feldera_table) => Ok(TablesSpec::Single {
            pg_table: pg_table.to_owned(),
            feldera_table: feldera_table.map(str::to_owned),
        }),
        (None, None, Some(_)) => Err(ConfigError::new(
            "PG_TABLE",
            None,
            "FELDERA_TABLE names the destination of PG_TABLE; set PG_TABLE too (or use TABLES)",
        )),
        (None, None, None) => Err(ConfigError::new("TABLES", None, TABLES_ACCEPTED)),
        (Some(list), _, _) => Err(ConfigError::new(
            "TABLES",
            Some(list),
            "use either TABLES or PG_TABLE/FELDERA_TABLE, not both",
        )),
    }
}

fn crash_spec(pairs: &Pairs) -> Result<Option<CrashSpec>, ConfigError> {
    let after = parse_u64_in(pairs, "CRASH_AFTER_BATCHES", 1, u64::MAX)?;
    let Some(name) = pairs.get("CRASH_AT") else {
        return Ok(None);
    };
    let point = CrashPoint::ALL
        .iter()
        .find(|(_, n)| *n == name)
        .map(|(p, _)| *p)
        .ok_or_else(|| {
            let names: Vec<&str> = CrashPoint::ALL.iter().map(|(_, n)| *n).collect();
            ConfigError::new(
                "CRASH_AT",
                Some(name),
                format!("one of {}", names.join(", ")),
            )
        })?;
    Ok(Some(CrashSpec { point, after }))
}

#[cfg(test)]
mod tests;
