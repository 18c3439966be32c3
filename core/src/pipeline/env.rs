//! What never changes during a run: the configuration and what was derived from it (the
//! routes, the Feldera endpoint, the state file's path, the outbox thresholds), and the
//! refusals of what the configuration alone can refuse.

use crate::config::{Config, ConfigError, TablesSpec};
use crate::contract::routes::{parse_pair, parse_tables, Route};
use crate::feldera::{redact_userinfo, FelderaEndpoint};
use crate::outbox::Thresholds;

/// What never changes during a run: the configuration and what was derived from it.
#[derive(Debug)]
pub(crate) struct Env {
    pub(crate) config: Config,
    pub(crate) routes: Vec<Route>,
    pub(crate) endpoint: FelderaEndpoint,
    pub(crate) thresholds: Thresholds,
    /// `<STATE_DIR>/<slot>.state.json`.
    pub(crate) state_path: String,
}

impl Env {
    /// What the configuration alone derives (routes, Feldera endpoint, state file path),
    /// or what it refuses.
    pub(crate) fn new(config: Config) -> Result<Env, ConfigError> {
        Env::derive(config, true)
    }

    /// The environment of `status` and `drop-slot` (`Purpose::SlotOperation`): no routes
    /// (they are not used, and `TABLES` may be absent). Without `FELDERA_PIPELINE` the
    /// endpoint names a pipeline `-`; the operations do not ask Feldera then.
    pub(crate) fn for_slot_operation(config: Config) -> Result<Env, ConfigError> {
        Env::derive(config, false)
    }

    /// The environment of `ddl`: the routes when `TABLES` (or `PG_TABLE`) names tables,
    /// none when they are to come from the publication.
    pub(crate) fn for_ddl(config: Config) -> Result<Env, ConfigError> {
        let with_routes = !matches!(&config.tables, TablesSpec::List(list) if list.is_empty());
        Env::derive(config, with_routes)
    }

    fn derive(config: Config, with_routes: bool) -> Result<Env, ConfigError> {
        let routes = match &config.tables {
            _ if !with_routes => Ok(Vec::new()),
            TablesSpec::List(list) => parse_tables(list),
            TablesSpec::Single {
                pg_table,
                feldera_table,
            } => parse_pair(pg_table, feldera_table.as_deref()).map(|r| vec![r]),
        }
        .map_err(|e| {
            let accepted = format!("{}; accepted: {}", e.problem, e.accepted);
            config_error(&config, e.variable, accepted)
        })?;
        let pipeline = match config.feldera_pipeline.as_str() {
            // No pipeline (status, drop-slot and ddl may run without one): Feldera is not asked.
            "" => "-",
            name => name,
        };
        let endpoint = FelderaEndpoint::new(
            &config.feldera_url,
            pipeline,
            config.feldera_api_key.as_ref().map(|k| k.expose()),
        )
        .map_err(|e| {
            let accepted = format!("{}; accepted: {}", e.problem, e.accepted);
            config_error(&config, e.variable, accepted)
        })?;
        let state_path = crate::snapshot::state::state_path(&config.state_dir, &config.slot)
            .map_err(|e| config_error(&config, "PG_SLOT", e.to_string()))?;
        let thresholds = Thresholds {
            max_rows: config.batch_max_rows,
            max_bytes: config.batch_max_bytes,
            linger_us: config.batch_linger_ms * 1000,
        };
        Ok(Env {
            routes,
            endpoint,
            thresholds,
            state_path,
            config,
        })
    }
}

/// A value the configuration accepted but a later check refuses: the variable as the user
/// set it, its value (secrets masked) and what is accepted.
fn config_error(config: &Config, variable: &str, accepted: impl Into<String>) -> ConfigError {
    let value = match variable {
        "TABLES" => match &config.tables {
            TablesSpec::List(list) => Some(list.clone()),
            TablesSpec::Single { .. } => None,
        },
        "PG_TABLE" | "FELDERA_TABLE" => match &config.tables {
            TablesSpec::Single {
                pg_table,
                feldera_table,
            } => {
                if variable == "PG_TABLE" {
                    Some(pg_table.clone())
                } else {
                    feldera_table.clone()
                }
            }
            TablesSpec::List(_) => None,
        },
        // The configuration refuses user info in FELDERA_URL; masked all the same, since
        // this message goes to stderr and logs as it is.
        "FELDERA_URL" => Some(redact_userinfo(&config.feldera_url).into_owned()),
        "FELDERA_PIPELINE" => Some(config.feldera_pipeline.clone()),
        "FELDERA_API_KEY" => Some("(not shown)".to_owned()),
        "PG_SLOT" => Some(config.slot.clone()),
        _ => None,
    };
    let mut error = ConfigError::new(variable, value.as_deref(), accepted);
    // Only reached for a value that was given: never "is required".
    error.value.get_or_insert_with(|| "(as given)".to_owned());
    error
}
