//! The operator's log: `tracing` events on stderr, filtered by `RUST_LOG` (default `info`),
//! as text or JSON lines (`LOG_FORMAT`).
//!
//! One line escapes the filter: why the process exits with a non-zero code. It is logged at
//! ERROR, and when the filter drops ERROR lines (`RUST_LOG=off`) it is printed plainly on
//! stderr instead, so a fatal reason is never lost to a quiet log setting. A clean exit
//! after an operator's report (`check`, `status`, `ddl`, `drop-slot` printed on stdout) is
//! logged at DEBUG: the report is the answer, and a timestamped line after it is noise.
//!
//! Owns the subscriber and the mapping of `Command::Log` onto events. Never formats a
//! `Config` or a request body: the core's messages are already free of secrets, and the
//! shells log only ids, methods, URLs (user info masked) and addresses.
//!
//! `RUST_LOG` reaches below INFO only for slotline's own targets. Dependencies log through
//! the same subscriber (the `log` crate's records included), and what they log below INFO
//! holds secrets: at TRACE `ureq_proto` dumps every byte it writes and reads (the
//! `Authorization` header with the API key, every row sent), and `ureq` prints request
//! paths unmasked; TLS libraries log handshake details. No directive can let them through
//! (`RUST_LOG=trace` or `RUST_LOG=ureq_proto=trace` alike): their warnings and errors stay.

use slotline_core::config::LogFormat;
use slotline_core::io::{Level, Topic};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use tracing::Metadata;
use tracing_subscriber::filter::{filter_fn, EnvFilter, LevelFilter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The target of every event, so `RUST_LOG=slotline=debug` selects slotline's own lines.
pub const TARGET: &str = "slotline";

/// `RUST_LOG` cannot be parsed.
#[derive(Debug)]
pub struct FilterError(pub String);

/// Builds the `RUST_LOG` filter (default `info`). Called before any side effect, so that a
/// bad filter is a usage error (exit 2) like any other bad option.
pub fn filter_from_env() -> Result<EnvFilter, FilterError> {
    EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .from_env()
        .map_err(|e| FilterError(format!("RUST_LOG is invalid: {e}")))
}

/// The binary's name, for the plain exit line (`slotline` until `init` says otherwise).
static PROGRAM: OnceLock<&'static str> = OnceLock::new();

/// Installs the global subscriber for binary `program`. A second call (tests) keeps the
/// first one.
pub fn init(program: &'static str, format: LogFormat, filter: EnvFilter) {
    let _already_named = PROGRAM.set(program);
    // An event is written when both filters let it through: `RUST_LOG`, and the cap on
    // dependencies (see the module docs).
    let subscriber = tracing_subscriber::registry()
        .with(filter)
        .with(filter_fn(within_dependency_cap));
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false);
    // Also routes the `log` crate's records (ureq's, rustls's) through these filters.
    let _already_set = match format {
        LogFormat::Text => subscriber.with(layer).try_init(),
        LogFormat::Json => subscriber.with(layer.json()).try_init(),
    };
}

/// The most detailed level at which a dependency's events are written, whatever `RUST_LOG`
/// says (see the module docs).
pub const DEPENDENCY_CAP: tracing::Level = tracing::Level::INFO;

/// Whether `target` is slotline's own: the topics of `emit` (`slotline`, `slotline::ack`,
/// ...) and the modules of its crates (`slotline::...` of the tokio shell,
/// `slotline_shell::...`, `slotline_blocking::...`, `slotline_core::...`).
pub fn is_own_target(target: &str) -> bool {
    target == TARGET || target.starts_with("slotline::") || target.starts_with("slotline_")
}

/// Lets through every event of slotline's own targets (`RUST_LOG` decides those) and a
/// dependency's events at `DEPENDENCY_CAP` or above only.
pub fn within_dependency_cap(metadata: &Metadata<'_>) -> bool {
    is_written(metadata.target(), *metadata.level())
}

/// `within_dependency_cap` for an event of `target` at `level`.
pub fn is_written(target: &str, level: tracing::Level) -> bool {
    is_own_target(target) || level <= DEPENDENCY_CAP
}

/// Emits a `Command::Log` line at its level, under the topic's target (`slotline::ack`, ...)
/// so `RUST_LOG` can select one topic; decision lines carry their topic as a prefix.
pub fn emit(level: Level, topic: Topic, message: &str) {
    // `tracing` takes the target as a literal: one arm per topic.
    macro_rules! at {
        ($target:literal, $($line:tt)*) => {
            match level {
                Level::Debug => tracing::debug!(target: $target, $($line)*),
                Level::Info => tracing::info!(target: $target, $($line)*),
                Level::Warn => tracing::warn!(target: $target, $($line)*),
                Level::Error => tracing::error!(target: $target, $($line)*),
            }
        };
    }
    match topic {
        Topic::General => at!("slotline", "{message}"),
        Topic::Ack => at!("slotline::ack", "ack: {message}"),
        Topic::Policy => at!("slotline::policy", "policy: {message}"),
        Topic::Batch => at!("slotline::batch", "batch: {message}"),
        Topic::Snapshot => at!("slotline::snapshot", "snapshot: {message}"),
        Topic::Retract => at!("slotline::retract", "retract: {message}"),
        Topic::Progress => at!("slotline::progress", "progress: {message}"),
    }
}

/// Whether the process printed a report for its operator on stdout (`Command::Print`).
static REPORTED: AtomicBool = AtomicBool::new(false);

/// Records that a report reached stdout, so a clean exit after it is not logged at INFO.
pub fn note_report() {
    REPORTED.store(true, Ordering::Relaxed);
}

/// Says why the process exits with `code`: at INFO for 0 (at DEBUG when a report was
/// printed: the operator has the answer on stdout), at ERROR otherwise. When the filter
/// drops that ERROR line, the reason is printed as one plain line on stderr instead (never
/// both). Flushes stderr, since `std::process::exit` follows.
pub fn exit_reason(code: i32, reason: &str) {
    if code == 0 && REPORTED.load(Ordering::Relaxed) {
        tracing::debug!(target: TARGET, "exiting with code {code}: {reason}");
    } else if code == 0 {
        tracing::info!(target: TARGET, "exiting with code {code}: {reason}");
    } else if tracing::enabled!(target: TARGET, tracing::Level::ERROR) {
        tracing::error!(target: TARGET, "exiting with code {code}: {reason}");
    } else {
        eprintln!("{}", plain_exit_line(code, reason));
    }
    flush();
}

/// The line printed when the log filter would hide a fatal reason.
pub fn plain_exit_line(code: i32, reason: &str) -> String {
    let program = PROGRAM.get().copied().unwrap_or("slotline");
    format!("{program}: exiting with code {code}: {reason}")
}

/// Flushes what the process wrote, before `std::process::exit` (which runs no destructors).
pub fn flush() {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    #[test]
    fn dependencies_are_capped_at_info_and_slotline_is_not() {
        for own in [
            "slotline",
            "slotline::ack",
            "slotline_shell::dispatch",
            "slotline_blocking::conn",
        ] {
            assert!(is_written(own, Level::TRACE), "{own}");
        }
        // The targets that printed the API key, rows and paths at TRACE and DEBUG.
        for dependency in [
            "ureq_proto::util",
            "ureq::run",
            "ureq::unversioned::transport::tcp",
            "rustls::client::hs",
            "tokio_rustls",
            "log",
        ] {
            assert!(!is_written(dependency, Level::TRACE), "{dependency}");
            assert!(!is_written(dependency, Level::DEBUG), "{dependency}");
            assert!(is_written(dependency, Level::INFO), "{dependency}");
            assert!(is_written(dependency, Level::WARN), "{dependency}");
            assert!(is_written(dependency, Level::ERROR), "{dependency}");
        }
        // Only the exact crate prefixes count as slotline's.
        assert!(!is_written("slotlinex", Level::DEBUG));
    }
}
