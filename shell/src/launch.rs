//! From process arguments to a running core: parse the command line, validate the
//! configuration, read the certificate files and the password file it names, set up
//! logging, choose the seed and build the pipeline. Environment variables that look meant
//! for slotline but are not read by it are warned about first (`env_warnings`).
//!
//! Everything here happens before any side effect (no socket, nothing written): a usage or
//! configuration error (an unreadable certificate included) prints one clear message on
//! stderr and becomes exit code 2.

use crate::cli::Operation;
use crate::clock::Clock;
use crate::machine::Machine;
use crate::metrics::MetricsServer;
use crate::run::RunOptions;
use crate::{cli, env_warnings, logging};
use slotline_core::config::{Config, Defaults, Purpose};
use slotline_core::io::exit;
use slotline_core::ops::{Check, Ddl, DropSlot, Status};
use slotline_core::pipeline::Pipeline;
use slotline_core::report::Format;
use std::ffi::OsString;

/// A machine ready to run (the pipeline, or an operator's command), the clock its start
/// time came from, the TLS setup for the run loop (`RunOptions::tls`) and the metrics
/// server when `METRICS_ADDR` asks for one (keep it alive for the run).
#[derive(Debug)]
pub struct Started {
    pub machine: Machine,
    pub clock: Clock,
    pub tls: std::sync::Arc<crate::tls::TlsSetup>,
    pub metrics: Option<MetricsServer>,
}

impl Started {
    /// The run loop's options for this machine.
    pub fn options(&self) -> RunOptions {
        RunOptions {
            tls: self.tls.clone(),
            metrics: self.metrics.as_ref().map(MetricsServer::publisher),
            ..RunOptions::default()
        }
    }
}

/// Prepares the run, or says with which code to exit (its message already printed):
/// 0 for `--help`/`--version`, 2 for usage and configuration errors.
pub fn start<I, T>(bin_name: &'static str, args: I) -> Result<Started, i32>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args = cli::parse(bin_name, args).map_err(|error| {
        // Help and version go to stdout with code 0, usage errors to stderr with code 2.
        let _ = error.print();
        error.exit_code()
    })?;
    // Before logging starts, and whatever RUST_LOG says: a misspelt variable is otherwise
    // ignored without a word. Names only, never values.
    let names: Vec<String> = std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .collect();
    let known = cli::variables_read();
    for warning in env_warnings::warnings(names.iter().map(String::as_str), &known) {
        eprintln!("{bin_name}: warning: {warning}");
    }
    if let (Some(notice), Some(Operation::Ddl { .. })) = (&args.notice, &args.operation) {
        eprintln!("{bin_name} ddl: {notice}");
    }
    // Configuration errors name variables; a variable the user gave as a flag is named
    // as that flag.
    let flags = args.flags;
    let usage = |message: String| {
        let message = cli::spell_flags(&message, &flags);
        eprintln!("{bin_name}: {message} (see {bin_name} --help)");
        exit::USAGE
    };
    let purpose = match args.operation {
        Some(Operation::Status { .. } | Operation::DropSlot { .. }) => Purpose::SlotOperation,
        Some(Operation::Ddl { .. }) => Purpose::Ddl,
        None | Some(Operation::Check { .. }) => Purpose::Run,
    };
    let defaults = Defaults {
        os_user: os_user(),
        state_dir: crate::state_dir::default_state_dir(),
        working_dir: crate::state_dir::working_dir(),
    };
    let mut config =
        Config::from_pairs_for(args.pairs, purpose, &defaults).map_err(|e| usage(e.to_string()))?;
    let tls = crate::tls::prepare(&config).map_err(|e| usage(e.to_string()))?;
    let filter = logging::filter_from_env().map_err(|e| usage(e.0))?;
    let seed = match args.seed {
        Some(seed) => seed,
        None => getrandom::u64().map_err(|e| {
            eprintln!("{bin_name}: cannot draw a random seed from the OS: {e}");
            exit::FATAL
        })?,
    };
    logging::init(bin_name, config.log_format, filter);
    tracing::debug!("core seed {seed} (set SLOTLINE_SEED to repeat a run)");
    crate::passfile::apply(&mut config.pg);
    let clock = Clock::start();
    let now = clock.now();
    let format = |json: bool| if json { Format::Json } else { Format::Text };
    let metrics_addr = config.metrics_addr.clone();
    let (state_dir, state_dir_given) = (config.state_dir.clone(), config.state_dir_given);
    let machine = match args.operation {
        None => Machine::Pipeline(Box::new(
            Pipeline::new(config, seed, now).map_err(|e| usage(e.to_string()))?,
        )),
        Some(Operation::Check { json }) => Machine::Check(Box::new(
            Check::new(config, now, format(json)).map_err(|e| usage(e.to_string()))?,
        )),
        Some(Operation::Status { json }) => Machine::Status(Box::new(
            Status::new(config, now, format(json)).map_err(|e| usage(e.to_string()))?,
        )),
        Some(Operation::Ddl { format: ddl, .. }) => Machine::Ddl(Box::new(
            Ddl::new(config, now, format(ddl == cli::DdlFormat::Json))
                .map_err(|e| usage(e.to_string()))?,
        )),
        Some(Operation::DropSlot { yes, json }) => Machine::DropSlot(Box::new(
            DropSlot::new(config, now, format(json), yes).map_err(|e| usage(e.to_string()))?,
        )),
    };
    if let Machine::Pipeline(_) = &machine {
        // The walsender's pid is PostgreSQL's (status, drop-slot); this is the connector's.
        tracing::info!(
            "{bin_name} {} running as pid {}",
            cli::VERSION,
            std::process::id()
        );
        let chosen = if state_dir_given {
            "STATE_DIR"
        } else {
            "the default; set STATE_DIR to choose another"
        };
        tracing::info!("state directory {state_dir} ({chosen})");
    }
    let metrics = match (&machine, metrics_addr) {
        (Machine::Pipeline(_), Some(addr)) => {
            let server = MetricsServer::start(&addr, clock).map_err(|e| {
                eprintln!("{bin_name}: cannot serve metrics on METRICS_ADDR={addr}: {e}");
                exit::USAGE
            })?;
            tracing::info!(
                "serving /metrics, /healthz and /readyz on http://{}",
                server.addr()
            );
            Some(server)
        }
        _ => None,
    };
    Ok(Started {
        machine,
        clock,
        tls: std::sync::Arc::new(tls),
        metrics,
    })
}

/// The OS user the process runs as, as the login environment names it (`USER`, else
/// `LOGNAME`): the PostgreSQL user when no setting names one, as with libpq.
fn os_user() -> Option<String> {
    ["USER", "LOGNAME"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
}
