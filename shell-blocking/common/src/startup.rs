//! From process arguments to a running core: parse the command line, validate the
//! configuration, read the certificate files and the password file it names, set up
//! logging, choose the seed and build the pipeline.
//!
//! Everything here happens before any side effect (no socket, nothing written): a usage or
//! configuration error (an unreadable certificate included) prints one clear message on
//! stderr and becomes exit code 2.

use crate::clock::Clock;
use crate::{cli, logging};
use slotline_core::config::Config;
use slotline_core::io::exit;
use slotline_core::pipeline::Pipeline;
use std::ffi::OsString;

/// A pipeline ready to run, the clock its start time came from, and the TLS setup for
/// the run loop (`RunOptions::tls`).
#[derive(Debug)]
pub struct Started {
    pub pipeline: Pipeline,
    pub clock: Clock,
    pub tls: std::sync::Arc<crate::tls::TlsSetup>,
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
    // Configuration errors name variables; a variable the user gave as a flag is named
    // as that flag.
    let flags = args.flags;
    let usage = |message: String| {
        let message = cli::spell_flags(&message, &flags);
        eprintln!("{bin_name}: {message} (see {bin_name} --help)");
        exit::USAGE
    };
    let mut config = Config::from_pairs(args.pairs).map_err(|e| usage(e.to_string()))?;
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
    let pipeline = Pipeline::new(config, seed, clock.now()).map_err(|e| usage(e.to_string()))?;
    Ok(Started {
        pipeline,
        clock,
        tls: std::sync::Arc::new(tls),
    })
}
