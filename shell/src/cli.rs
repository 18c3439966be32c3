//! The command line: every option (docs/guide/configuration.md, "Options") as a `--kebab-case` flag
//! and its environment variable, turned into the key/value pairs `Config::from_pairs` validates.
//!
//! Owns spelling (flag names, help text, which values `--help` hides). Never validates a
//! value itself: the core's `config` module is the one place that knows what is accepted,
//! and the defaults shown by `--help` are read from its `VARIABLES` table.

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser};
use slotline_core::config::{is_secret, VARIABLES};

/// The default of a configuration variable, as the core applies it.
fn default_of(variable: &str) -> Option<&'static str> {
    VARIABLES
        .iter()
        .find(|(name, _)| *name == variable)
        .and_then(|(_, default)| *default)
}

/// The version and the git commit the binary was built from (`build.rs`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SLOTLINE_COMMIT"),
    ")"
);

/// The headings `--help` groups the options under, in the order it shows them.
pub const HEADINGS: [&str; 6] = [POSTGRES, ROUTES, FELDERA, SNAPSHOT, TUNING, OPERATIONS];
const POSTGRES: &str = "PostgreSQL";
const ROUTES: &str = "Routes (which tables, to which Feldera tables)";
const FELDERA: &str = "Feldera";
const SNAPSHOT: &str = "Snapshot and state";
const TUNING: &str = "Batching and timeouts";
const OPERATIONS: &str = "Operations and monitoring";

/// slotline: stream PostgreSQL logical replication (pgoutput) into Feldera pipelines.
///
/// Every option is also read from the environment variable shown. As with libpq, the PG*
/// options fill in whatever PG_URL leaves unset (all of it without a PG_URL). Exit codes: 0 graceful
/// stop, 1 fatal data or contract error, 2 usage or configuration error, 69 no durable
/// progress, 70 injected crash; a second SIGINT/SIGTERM exits at once with 130/143.
#[derive(Debug, Parser)]
#[command(version = VERSION)]
pub struct Cli {
    /// PostgreSQL to connect to: postgres://user:pass@host:port/db?sslmode=... or a
    /// key=value conninfo string; the PG* options below fill in what it leaves unset
    #[arg(long, global = true, help_heading = POSTGRES, env = "PG_URL", hide_env_values = true)]
    pub pg_url: Option<String>,
    /// PostgreSQL host, or the directory of its Unix socket, unless PG_URL names one
    /// (localhost if neither does)
    #[arg(long, global = true, help_heading = POSTGRES, env = "PGHOST")]
    pub pg_host: Option<String>,
    /// PostgreSQL port, unless PG_URL names one (5432 if neither does)
    #[arg(long, global = true, help_heading = POSTGRES, env = "PGPORT")]
    pub pg_port: Option<String>,
    /// PostgreSQL user, unless PG_URL names one (the OS user if neither does)
    #[arg(long, global = true, help_heading = POSTGRES, env = "PGUSER")]
    pub pg_user: Option<String>,
    /// PostgreSQL password, unless PG_URL holds one (else the password file is read);
    /// never logged
    #[arg(long, global = true, help_heading = POSTGRES, env = "PGPASSWORD", hide_env_values = true)]
    pub pg_password: Option<String>,
    /// PostgreSQL database, unless PG_URL names one (the user's name if neither does)
    #[arg(long, global = true, help_heading = POSTGRES, env = "PGDATABASE")]
    pub pg_database: Option<String>,
    /// disable, allow, prefer, require, verify-ca or verify-full, unless PG_URL sets
    /// sslmode (prefer if neither does; verify-full with sslrootcert system)
    #[arg(long, global = true, help_heading = POSTGRES, env = "PGSSLMODE")]
    pub pg_sslmode: Option<String>,
    /// CA certificates (PEM file) to verify the server with, or `system` for the
    /// platform's trusted roots, unless PG_URL sets sslrootcert
    #[arg(long, global = true, help_heading = POSTGRES, env = "PGSSLROOTCERT")]
    pub pg_sslrootcert: Option<String>,
    /// Client certificate (PEM file) for TLS client authentication, unless PG_URL sets
    /// sslcert
    #[arg(long, global = true, help_heading = POSTGRES, env = "PGSSLCERT")]
    pub pg_sslcert: Option<String>,
    /// Private key (PEM file) of the client certificate, unless PG_URL sets sslkey
    #[arg(long, global = true, help_heading = POSTGRES, env = "PGSSLKEY")]
    pub pg_sslkey: Option<String>,
    /// Seconds a connection (TCP connect and TLS handshake) may take, unless PG_URL sets
    /// connect_timeout; 0, or set by neither, waits for ever
    #[arg(long, global = true, help_heading = POSTGRES, env = "PGCONNECT_TIMEOUT")]
    pub pg_connect_timeout: Option<String>,
    /// Password file, read when no password is given, unless PG_URL sets passfile
    /// (~/.pgpass if neither does)
    #[arg(long, global = true, help_heading = POSTGRES, env = "PGPASSFILE")]
    pub pg_passfile: Option<String>,
    /// Which of several hosts (PG_URL or PGHOST listing them, comma-separated) a session
    /// may use, unless PG_URL sets target_session_attrs: any, read-write, read-only,
    /// primary, standby, prefer-standby (any if neither does)
    #[arg(long, global = true, help_heading = POSTGRES, env = "PGTARGETSESSIONATTRS")]
    pub pg_target_session_attrs: Option<String>,
    /// Publication to stream (required)
    #[arg(long, global = true, help_heading = POSTGRES, env = "PG_PUBLICATION")]
    pub pg_publication: Option<String>,
    /// Logical replication slot, created if absent (slotline_<pipeline> if unset)
    #[arg(long, global = true, help_heading = POSTGRES, env = "PG_SLOT")]
    pub pg_slot: Option<String>,
    /// Create the slot as a failover slot, synchronized to standbys (PostgreSQL 17+)
    #[arg(
        long,
        global = true,
        help_heading = POSTGRES,
        env = "PG_SLOT_FAILOVER",
        default_value = default_of("PG_SLOT_FAILOVER")
    )]
    pub pg_slot_failover: Option<String>,
    /// Tables to stream: users,items or users:USERS,public.items:lineitems (required,
    /// or PG_TABLE)
    #[arg(long, global = true, help_heading = ROUTES, env = "TABLES")]
    pub tables: Option<String>,
    /// A single PostgreSQL table to stream (instead of TABLES)
    #[arg(long, global = true, help_heading = ROUTES, env = "PG_TABLE")]
    pub pg_table: Option<String>,
    /// The Feldera table PG_TABLE goes to (the PostgreSQL name if unset)
    #[arg(long, global = true, help_heading = ROUTES, env = "FELDERA_TABLE")]
    pub feldera_table: Option<String>,
    /// Feldera API base URL
    #[arg(
        long,
        global = true,
        help_heading = FELDERA,
        env = "FELDERA_URL",
        default_value = default_of("FELDERA_URL")
    )]
    pub feldera_url: Option<String>,
    /// Feldera pipeline name (required)
    #[arg(long, global = true, help_heading = FELDERA, env = "FELDERA_PIPELINE")]
    pub feldera_pipeline: Option<String>,
    /// Feldera API key, sent as Authorization: Bearer; never logged
    #[arg(
        long,
        global = true,
        help_heading = FELDERA,
        env = "FELDERA_API_KEY",
        hide_env_values = true
    )]
    pub feldera_api_key: Option<String>,
    /// CA certificates (PEM file) that vouch for an https:// Feldera (instead of the
    /// built-in public roots)
    #[arg(long, global = true, help_heading = FELDERA, env = "FELDERA_CA_CERT")]
    pub feldera_ca_cert: Option<String>,
    /// When a batch is durable: completed (Feldera processed it) or accepted (HTTP 200;
    /// unsafe, for demonstration)
    #[arg(
        long,
        global = true,
        help_heading = FELDERA,
        env = "FELDERA_ACK_MODE",
        default_value = default_of("FELDERA_ACK_MODE")
    )]
    pub feldera_ack_mode: Option<String>,
    /// Refuse tables without a PRIMARY KEY in Feldera
    #[arg(
        long,
        global = true,
        help_heading = FELDERA,
        env = "FELDERA_REQUIRE_PRIMARY_KEY",
        default_value = default_of("FELDERA_REQUIRE_PRIMARY_KEY")
    )]
    pub feldera_require_primary_key: Option<String>,
    /// off, large (a source transaction spanning more than one batch becomes one Feldera
    /// transaction) or all (every batch too): views never see part of it
    #[arg(
        long,
        global = true,
        help_heading = FELDERA,
        env = "FELDERA_TRANSACTIONS",
        default_value = default_of("FELDERA_TRANSACTIONS")
    )]
    pub feldera_transactions: Option<String>,
    /// What a batch must reach before it is acknowledged: auto (checkpoint when the pipeline
    /// has fault tolerance, else completion), checkpoint (a Feldera checkpoint holds it) or
    /// completion (Feldera processed it)
    #[arg(
        long,
        global = true,
        help_heading = FELDERA,
        env = "FELDERA_DURABILITY",
        default_value = default_of("FELDERA_DURABILITY")
    )]
    pub feldera_durability: Option<String>,
    /// How often checkpoint durability asks Feldera for a checkpoint, in seconds (1 to 3600)
    #[arg(
        long,
        global = true,
        help_heading = FELDERA,
        env = "FELDERA_CHECKPOINT_INTERVAL_SECS",
        default_value = default_of("FELDERA_CHECKPOINT_INTERVAL_SECS")
    )]
    pub feldera_checkpoint_interval_secs: Option<String>,
    /// When the pipeline restarted without fault tolerance (its tables empty): resnapshot
    /// (seed it again) or exit
    #[arg(
        long,
        global = true,
        help_heading = FELDERA,
        env = "FELDERA_RESTART",
        default_value = default_of("FELDERA_RESTART")
    )]
    pub feldera_restart: Option<String>,
    /// initial (copy every table under the slot's snapshot, then stream), never (stream
    /// only, copy nothing) or inconsistent (copy, then create the slot: demonstrates loss)
    #[arg(
        long,
        global = true,
        help_heading = SNAPSHOT,
        env = "SNAPSHOT_MODE",
        default_value = default_of("SNAPSHOT_MODE")
    )]
    pub snapshot_mode: Option<String>,
    /// Directory of <slot>.state.json, the snapshot's record (SNAPSHOT_MODE=never writes
    /// none). Unset: $XDG_STATE_HOME/slotline, else /var/lib/slotline when writable (root,
    /// services), else ~/.local/state/slotline; never the working directory
    #[arg(long, global = true, help_heading = SNAPSHOT, env = "STATE_DIR")]
    pub state_dir: Option<String>,
    /// Connections copying the initial snapshot in parallel (never more than the work)
    #[arg(
        long,
        global = true,
        help_heading = SNAPSHOT,
        env = "SNAPSHOT_WORKERS",
        default_value = default_of("SNAPSHOT_WORKERS")
    )]
    pub snapshot_workers: Option<String>,
    /// Keys asked about in one PostgreSQL question when retracting a re-snapshot's leftovers
    #[arg(
        long,
        global = true,
        help_heading = SNAPSHOT,
        env = "RETRACT_PAGE_ROWS",
        default_value = default_of("RETRACT_PAGE_ROWS")
    )]
    pub retract_page_rows: Option<String>,
    /// Rows an online copy reads in one chunk, in its own short transaction (1 to 1000000;
    /// at most two chunks' rows wait in memory for their watermarks)
    #[arg(
        long,
        global = true,
        help_heading = SNAPSHOT,
        env = "COPY_CHUNK_ROWS",
        default_value = default_of("COPY_CHUNK_ROWS")
    )]
    pub copy_chunk_rows: Option<String>,
    /// Flush a batch at this many rows (1 to 100000: a Feldera ingress endpoint pauses at
    /// 100000 queued records)
    #[arg(
        long,
        global = true,
        help_heading = TUNING,
        env = "BATCH_MAX_ROWS",
        default_value = default_of("BATCH_MAX_ROWS")
    )]
    pub batch_max_rows: Option<String>,
    /// Flush a batch at this many encoded bytes
    #[arg(
        long,
        global = true,
        help_heading = TUNING,
        env = "BATCH_MAX_BYTES",
        default_value = default_of("BATCH_MAX_BYTES")
    )]
    pub batch_max_bytes: Option<String>,
    /// While batches are in flight, longest wait from the oldest buffered event (with
    /// nothing in flight a commit goes at once); 0 = one request per transaction
    #[arg(
        long,
        global = true,
        help_heading = TUNING,
        env = "BATCH_LINGER_MS",
        default_value = default_of("BATCH_LINGER_MS")
    )]
    pub batch_linger_ms: Option<String>,
    /// Batches sent to Feldera and not yet durable at once (1 to 64; above 1, times BATCH_MAX_ROWS at most 50000)
    #[arg(
        long,
        global = true,
        help_heading = TUNING,
        env = "MAX_IN_FLIGHT_BATCHES",
        default_value = default_of("MAX_IN_FLIGHT_BATCHES")
    )]
    pub max_in_flight_batches: Option<String>,
    /// Give up on a completion wait after this long (waits over 5 s are logged)
    #[arg(
        long,
        global = true,
        help_heading = TUNING,
        env = "FELDERA_COMPLETION_TIMEOUT_MS",
        default_value = default_of("FELDERA_COMPLETION_TIMEOUT_MS")
    )]
    pub feldera_completion_timeout_ms: Option<String>,
    /// An ad-hoc query of Feldera (a table's keys, its row count) may take this long
    #[arg(
        long,
        global = true,
        help_heading = TUNING,
        env = "QUERY_TIMEOUT_SECS",
        default_value = default_of("QUERY_TIMEOUT_SECS")
    )]
    pub query_timeout_secs: Option<String>,
    /// Exit 69 after this long without durable progress
    #[arg(
        long,
        global = true,
        help_heading = TUNING,
        env = "NO_PROGRESS_TIMEOUT_SECS",
        default_value = default_of("NO_PROGRESS_TIMEOUT_SECS")
    )]
    pub no_progress_timeout_secs: Option<String>,
    /// A graceful stop waits this long for the slot to show the final position
    #[arg(
        long,
        global = true,
        help_heading = TUNING,
        env = "SHUTDOWN_CONFIRM_MS",
        default_value = default_of("SHUTDOWN_CONFIRM_MS")
    )]
    pub shutdown_confirm_ms: Option<String>,
    /// Serve Prometheus metrics at /metrics, and /healthz and /readyz, on this address
    /// (host:port, like 127.0.0.1:9187); off if unset
    #[arg(long, global = true, help_heading = OPERATIONS, env = "METRICS_ADDR")]
    pub metrics_addr: Option<String>,
    /// Warn (log and metric) when the slot retains more WAL than this many bytes (besides
    /// 80% of the server's max_slot_wal_keep_size)
    #[arg(long, global = true, help_heading = OPERATIONS, env = "SLOT_WAL_WARN_BYTES")]
    pub slot_wal_warn_bytes: Option<String>,
    /// How often the slot's health is sampled while running (0: never)
    #[arg(
        long,
        global = true,
        help_heading = OPERATIONS,
        env = "SLOT_CHECK_INTERVAL_MS",
        default_value = default_of("SLOT_CHECK_INTERVAL_MS")
    )]
    pub slot_check_interval_ms: Option<String>,
    /// Log a progress line (rows, transactions, batches, flushed position, lag, completion
    /// waits) this often while something happens; 0 turns it off
    #[arg(
        long,
        global = true,
        help_heading = OPERATIONS,
        env = "PROGRESS_INTERVAL_SECS",
        default_value = default_of("PROGRESS_INTERVAL_SECS")
    )]
    pub progress_interval_secs: Option<String>,
    /// text or json; the level comes from RUST_LOG (default info). Why a non-zero exit
    /// happened is printed on stderr whatever RUST_LOG says
    #[arg(
        long,
        global = true,
        help_heading = OPERATIONS,
        env = "LOG_FORMAT",
        default_value = default_of("LOG_FORMAT")
    )]
    pub log_format: Option<String>,
    /// Test only (hidden from --help): exit 70 at this crash point (before_send,
    /// after_send, after_complete, after_ack, snapshot_after_slot, snapshot_mid_copy,
    /// snapshot_before_complete, retract_after_query, retract_mid_delete)
    #[arg(long, global = true, hide = true, env = "CRASH_AT")]
    pub crash_at: Option<String>,
    /// Test only (hidden from --help): crash the N-th time CRASH_AT is reached
    #[arg(
        long,
        global = true,
        hide = true,
        env = "CRASH_AFTER_BATCHES",
        default_value = default_of("CRASH_AFTER_BATCHES")
    )]
    pub crash_after_batches: Option<String>,
    /// Seed of the core's random choices (backoff jitter), for reproducible runs
    /// (drawn from the OS if unset); hidden from --help, for tests
    #[arg(long, global = true, hide = true, env = "SLOTLINE_SEED", value_parser = parse_seed)]
    pub seed: Option<Seed>,
    #[command(subcommand)]
    pub operation: Option<Operation>,
}

/// An operator's command instead of a run (same options; nothing is created by `check`
/// and `status`).
#[derive(Clone, Debug, PartialEq, Eq, clap::Subcommand)]
pub enum Operation {
    /// Check everything a start verifies without creating anything; exit 0 when the setup
    /// would work, 1 when not (each problem on its own line, with how to fix it)
    Check {
        /// Print the report as JSON
        #[arg(long)]
        json: bool,
    },
    /// Show the slot (active, confirmed_flush_lsn, lag, retained WAL, wal_status,
    /// safe_wal_size), the state file and Feldera's pipeline state
    Status {
        /// Print the report as JSON
        #[arg(long)]
        json: bool,
    },
    /// Print Feldera SQL (or the program schema JSON) for the routed tables: one CREATE
    /// TABLE each, typed as slotline maps PostgreSQL's columns, with NOT NULL, the PRIMARY
    /// KEY (or the replica identity index) and a comment per lossy or refused column. The
    /// tables are those of TABLES, else those PG_PUBLICATION publishes (with --publication,
    /// TABLES from the environment is ignored); nothing is created, and Feldera is not
    /// asked
    Ddl {
        /// sql (CREATE TABLE statements) or json (as Feldera's program_info.schema
        /// describes them)
        #[arg(long, value_enum, default_value_t = DdlFormat::Sql)]
        format: DdlFormat,
        /// The publication whose tables to describe (overrides PG_PUBLICATION). TABLES,
        /// PG_TABLE and FELDERA_TABLE from the environment are then ignored; given as flags
        /// (--tables), they still choose the tables, described as this publication
        /// publishes them
        #[arg(long)]
        publication: Option<String>,
    },
    /// Drop the replication slot and the state file (refused without --yes, and while
    /// the slot is active)
    DropSlot {
        /// Really drop them
        #[arg(long)]
        yes: bool,
        /// Print the report as JSON
        #[arg(long)]
        json: bool,
    },
}

/// What `slotline ddl` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DdlFormat {
    Sql,
    Json,
}

/// `SLOTLINE_SEED`; empty means unset, as for every configuration variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seed(pub Option<u64>);

fn parse_seed(raw: &str) -> Result<Seed, String> {
    if raw.is_empty() {
        return Ok(Seed(None));
    }
    raw.parse::<u64>()
        .map(|seed| Seed(Some(seed)))
        .map_err(|_| format!("a whole number from 0 to {}", u64::MAX))
}

/// What the command line asked for: the configuration pairs (only options actually given,
/// by flag or environment; the core applies its own defaults) and the shell's own options.
#[derive(Clone, PartialEq, Eq)]
pub struct Args {
    pub pairs: Vec<(String, String)>,
    pub seed: Option<u64>,
    /// The variables given as flags (`TABLES` → `--tables`), so messages can name what
    /// the user typed.
    pub flags: Vec<(String, String)>,
    /// `check`, `status`, `drop-slot` or `ddl`; `None`: run.
    pub operation: Option<Operation>,
    /// What the command line decided that the user may not expect, for one line on stderr
    /// (`ddl --publication` ignoring TABLES from the environment).
    pub notice: Option<String>,
}

impl std::fmt::Debug for Args {
    /// Values may be secrets: only the keys are printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<&str> = self.pairs.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Args")
            .field("keys", &keys)
            .field("seed", &self.seed)
            .field("flags", &self.flags)
            .field("operation", &self.operation)
            .field("notice", &self.notice)
            .finish()
    }
}

/// The clap command of a binary (its name is the binary's). `--help` shows an option's
/// environment value only where `shows_env_value` allows: `[env: PGHOST=db.example]` when
/// set, `[env: PGHOST]` when unset or empty (never `[env: PGHOST=]`) and for secrets.
pub fn command(bin_name: &'static str) -> clap::Command {
    Cli::command()
        .name(bin_name)
        .bin_name(bin_name)
        .mut_args(|arg| {
            let shown = arg.get_env().is_some_and(|variable| {
                let value = std::env::var_os(variable);
                variable
                    .to_str()
                    .is_some_and(|variable| shows_env_value(variable, value.as_deref()))
            });
            match shown {
                true => arg,
                false => arg.hide_env_values(true),
            }
        })
}

/// Every environment variable an option is read from (the configuration's and the
/// shell's own, such as `SLOTLINE_SEED`), in the order of the options.
pub fn variables_read() -> Vec<String> {
    Cli::command()
        .get_arguments()
        .filter_map(|arg| arg.get_env().and_then(|v| v.to_str()).map(str::to_owned))
        .collect()
}

/// Whether `--help` may show the value `variable` has in the environment: only a value that
/// is set, not empty (an empty variable counts as unset) and not a secret.
pub fn shows_env_value(variable: &str, value: Option<&std::ffi::OsStr>) -> bool {
    !is_secret(variable) && value.is_some_and(|value| !value.is_empty())
}

/// Parses arguments (the first is the program) and the environment. A clap error is
/// returned as is: `Error::exit_code` is 2 for usage errors and 0 for `--help`/`--version`.
pub fn parse<I, T>(bin_name: &'static str, args: I) -> Result<Args, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let matches = command(bin_name).try_get_matches_from(args)?;
    let cli = Cli::from_arg_matches(&matches)?;
    let (mut pairs, mut flags) = pairs_of(&matches);
    let notice = match &cli.operation {
        Some(Operation::Ddl {
            publication: Some(publication),
            ..
        }) => ddl_publication(&mut pairs, &mut flags, publication),
        _ => None,
    };
    Ok(Args {
        pairs,
        seed: cli.seed.and_then(|seed| seed.0),
        flags,
        operation: cli.operation,
        notice,
    })
}

/// The variables that choose the routed tables.
const ROUTE_VARIABLES: [&str; 3] = ["TABLES", "PG_TABLE", "FELDERA_TABLE"];

/// `ddl --publication P`: P replaces PG_PUBLICATION, and the tables are P's. Route
/// variables inherited from the environment (a TABLES set for the run) are dropped, so they
/// cannot silently describe other tables than the ones asked for; route options given as
/// flags with it are the user's choice and kept (those tables, as P publishes them).
/// Returns what to say when something inherited was dropped. `flags` tells which of
/// `pairs` came from the command line; the others came from the environment.
pub fn ddl_publication(
    pairs: &mut Vec<(String, String)>,
    flags: &mut Vec<(String, String)>,
    publication: &str,
) -> Option<String> {
    pairs.retain(|(variable, _)| variable != "PG_PUBLICATION");
    pairs.push(("PG_PUBLICATION".to_owned(), publication.to_owned()));
    flags.retain(|(variable, _)| variable != "PG_PUBLICATION");
    flags.push(("PG_PUBLICATION".to_owned(), "--publication".to_owned()));
    let is_flag = |variable: &str| flags.iter().any(|(v, _)| v == variable);
    let inherited = |variable: &str| ROUTE_VARIABLES.contains(&variable) && !is_flag(variable);
    // An empty variable counts as unset: dropped without a word.
    let ignored: Vec<&str> = ROUTE_VARIABLES
        .into_iter()
        .filter(|v| inherited(v) && pairs.iter().any(|(k, value)| k == v && !value.is_empty()))
        .collect();
    pairs.retain(|(variable, _)| !inherited(variable));
    if ignored.is_empty() {
        return None;
    }
    let ignored = match ignored.as_slice() {
        [one] => format!("{one} from the environment is ignored"),
        [first @ .., last] => format!(
            "{} and {last} from the environment are ignored",
            first.join(", ")
        ),
        [] => unreachable!("not empty"),
    };
    let given: Vec<&str> = flags
        .iter()
        .filter(|(variable, _)| ROUTE_VARIABLES.contains(&variable.as_str()))
        .map(|(_, flag)| flag.as_str())
        .collect();
    Some(match given.as_slice() {
        [] => {
            format!("describing the tables of publication {publication} (--publication); {ignored}")
        }
        _ => format!(
            "describing the tables of {} as publication {publication} publishes them; {ignored}",
            given.join(" and ")
        ),
    })
}

/// The configuration pairs of every option given by flag or environment, keyed by its
/// environment variable's name (the key `Config::from_pairs` expects); and which of them
/// were flags, with the flag's spelling.
#[allow(clippy::type_complexity)]
fn pairs_of(matches: &ArgMatches) -> (Vec<(String, String)>, Vec<(String, String)>) {
    let command = Cli::command();
    let mut pairs = Vec::new();
    let mut flags = Vec::new();
    for arg in command.get_arguments() {
        let Some(variable) = arg.get_env().and_then(|v| v.to_str()) else {
            continue;
        };
        if !VARIABLES.iter().any(|(name, _)| *name == variable) {
            continue; // a shell option (SLOTLINE_SEED), not configuration
        }
        let id = arg.get_id().as_str();
        let source = matches.value_source(id);
        let given = matches!(
            source,
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        );
        if let (true, Some(value)) = (given, matches.get_one::<String>(id)) {
            pairs.push((variable.to_owned(), value.clone()));
        }
        if let (Some(ValueSource::CommandLine), Some(long)) = (source, arg.get_long()) {
            flags.push((variable.to_owned(), format!("--{long}")));
        }
    }
    (pairs, flags)
}

/// `text` with every configuration variable the user gave as a flag spelled as that flag
/// (`TABLES is invalid` → `--tables is invalid`). Only whole names are replaced: `PG_TABLE`
/// never matches inside `FELDERA_TABLE`.
pub fn spell_flags(text: &str, flags: &[(String, String)]) -> String {
    let is_name_byte = |b: u8| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_';
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if !is_name_byte(bytes[i]) {
            let next = text[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&text[i..i + next]);
            i += next;
            continue;
        }
        let end = bytes[i..]
            .iter()
            .position(|b| !is_name_byte(*b))
            .map_or(text.len(), |n| i + n);
        let word = &text[i..end];
        match flags.iter().find(|(variable, _)| variable == word) {
            Some((_, flag)) => out.push_str(flag),
            None => out.push_str(word),
        }
        i = end;
    }
    out
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
