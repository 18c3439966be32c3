//! `e2e-bench`: end-to-end speed, memory and idle cost of the connector binaries against a
//! real PostgreSQL and the Feldera double, each figure next to a plain PostgreSQL client
//! doing the same reading on the same cluster in the same run.
//!
//! ```text
//! cargo build --release -p slotline -p slotline-blocking
//! cargo run --release -p slotline-tests --bin e2e-bench -- stream   [options]
//! cargo run --release -p slotline-tests --bin e2e-bench -- snapshot [options]
//! cargo run --release -p slotline-tests --bin e2e-bench -- idle     [options]
//! cargo run --release -p slotline-tests --bin e2e-bench -- retract  [options]
//! cargo run --release -p slotline-tests --bin e2e-bench -- latency  [options]
//! cargo run --release -p slotline-tests --bin e2e-bench -- add-table [options]
//! ```
//! - `stream`: catching up on WAL already written, divided by `pg_recvlogical`'s time on
//!   the same WAL (`support/bench/stream.rs`); with `--durability completion,checkpoint
//!   --fault-tolerance at_least_once`, also when the double had every row against when the
//!   slot confirmed it, per `FELDERA_DURABILITY`, in the same invocation;
//! - `snapshot`: the initial copy, divided by `psql -c "COPY t TO STDOUT"` of the same table
//!   (`support/bench/snapshot.rs`);
//! - `idle`: CPU of caught-up connectors over a while, and the binaries' sizes;
//! - `retract`: a TRUNCATE of a table Feldera holds N rows of, and a re-snapshot finding N
//!   leftovers, divided by the time the same N deletes take streamed from a `DELETE`
//!   (`support/bench/retract.rs`), with the queries the double answered;
//! - `latency`: a single-row commit's way to the double at a steady commit rate, from just
//!   before its INSERT is sent to when the double showed the row (`support/bench/latency.rs`);
//! - `add-table`: a table added to a running deployment, copied online and (REPLICA IDENTITY
//!   FULL) exported, while another table's commits stream: their latency during the copy,
//!   the age of the snapshots slotline holds, and the copy against `psql -c "COPY t TO
//!   STDOUT"` of the same table (`support/bench/add_table.rs`).
//!
//! Every suite takes `--binaries DIR` (the connectors in DIR instead of this build's) and
//! `--baseline DIR` (also the connectors in DIR, labelled `@base`, alternating run by run
//! with the others): a before/after comparison in one invocation.
//!
//! Owns: the command line and the report's header and footer. Never asserts a figure.

mod support;

#[path = "support/bench/mod.rs"]
mod bench;

use bench::add_table::{AddTableArgs, Mode};
use bench::latency::{LatencyArgs, Rate};
use bench::retract::{RetractArgs, Scenario};
use bench::snapshot::{Sink, SnapshotArgs};
use bench::stream::{StreamArgs, Workload};
use bench::{Binary, Common};
use clap::{Parser, Subcommand};
use slotline_tests::e2e::Shell;
use slotline_tests::feldera_double::DEFAULT_CHECKPOINT_DELAY;
use slotline_tests::pg::{ClusterOptions, PgCluster};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(about = "End-to-end benchmark: PostgreSQL → slotline → Feldera double")]
struct Args {
    #[command(subcommand)]
    suite: Suite,
}

/// Options every suite takes.
#[derive(Debug, clap::Args)]
struct Shared {
    /// Only this shell (tokio or blocking); both when absent, alternating run by run.
    #[arg(long, value_parser = support::parse_shell)]
    shell: Option<Shell>,
    /// Extra connector variables, e.g. `--env BATCH_LINGER_MS=0` (repeatable).
    #[arg(long = "env", value_parser = parse_pair)]
    extra: Vec<(String, String)>,
    /// Keep each connector's log in this directory (`<slot>.log`).
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// Run each connector under this command, split on spaces (e.g. `valgrind
    /// --tool=callgrind --callgrind-out-file=/tmp/cg.%p`): the times then mean nothing.
    #[arg(long)]
    wrapper: Option<String>,
    /// Run the connector binaries DIR/slotline and DIR/slotline-blocking instead of this
    /// build's (nothing is built).
    #[arg(long, value_name = "DIR")]
    binaries: Option<PathBuf>,
    /// Also run the binaries in DIR, labelled `<binary>@base`, each right after the same
    /// shell's other binary: a before/after comparison in one invocation.
    #[arg(long, value_name = "DIR")]
    baseline: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Suite {
    /// Catch up on WAL written beforehand, against `pg_recvlogical` on the same WAL.
    Stream {
        #[command(flatten)]
        shared: Shared,
        /// Workloads: commits (single-row transactions), txns (several large
        /// transactions), one-txn (one very large transaction).
        #[arg(long, value_delimiter = ',', default_value = "commits,txns,one-txn")]
        workloads: Vec<String>,
        /// Transactions of the `commits` workload.
        #[arg(long, default_value_t = 100_000)]
        commits: u64,
        /// Transactions of the `txns` workload ...
        #[arg(long, default_value_t = 10)]
        txns: u64,
        /// ... of this many rows each.
        #[arg(long, default_value_t = 10_000)]
        txn_rows: u64,
        /// Rows of the `one-txn` workload.
        #[arg(long, default_value_t = 1_000_000)]
        big_rows: u64,
        /// The double's completion delays to run each workload with, in milliseconds.
        #[arg(long, value_delimiter = ',', default_value = "0,20,200")]
        delays_ms: Vec<u64>,
        /// `MAX_IN_FLIGHT_BATCHES` values to run each workload with; absent: the product
        /// default (a build that does not know the variable ignores it: window 1).
        #[arg(long, value_delimiter = ',')]
        max_in_flight_batches: Vec<u32>,
        /// `FELDERA_DURABILITY` values (auto, checkpoint, completion), each run right after
        /// the other for every shell; each such run also reports when the double had
        /// processed every row and its checkpoints. Absent: the variable is not set.
        #[arg(long, value_delimiter = ',')]
        durability: Vec<String>,
        /// The double's fault-tolerance model (none, at_least_once, exactly_once) in every
        /// run; checkpoints need one. Absent: none.
        #[arg(long)]
        fault_tolerance: Option<String>,
    },
    /// The initial copy, against `psql -c "COPY t TO STDOUT" > /dev/null`.
    Snapshot {
        #[command(flatten)]
        shared: Shared,
        /// Rows of the narrow table (bigint, text, timestamptz); 0 skips it.
        #[arg(long, default_value_t = 1_000_000)]
        narrow_rows: u64,
        /// Rows of the 20-column table; 0 skips it.
        #[arg(long, default_value_t = 1_000_000)]
        wide_rows: u64,
        /// `SNAPSHOT_WORKERS` values.
        #[arg(long, value_delimiter = ',', default_value = "1,4")]
        workers: Vec<u32>,
        /// What receives the rows: double (parses and applies them), discard (accepts and
        /// completes without parsing).
        #[arg(long, value_delimiter = ',', default_value = "double,discard")]
        sinks: Vec<String>,
    },
    /// Emptying a Feldera table: TRUNCATE and a re-snapshot's leftovers, against the same
    /// deletes streamed from a DELETE.
    Retract {
        #[command(flatten)]
        shared: Shared,
        /// Rows Feldera holds when the retraction starts.
        #[arg(long, default_value_t = 1_000_000)]
        rows: u64,
        /// Scenarios, each run for every shell: delete (the baseline), truncate, resnapshot.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "delete,truncate,resnapshot"
        )]
        scenarios: Vec<String>,
        /// What the double's scan charges per row it visits, to mimic a slower engine (0:
        /// nothing beyond its own work).
        #[arg(long, default_value_t = 0)]
        scan_ns_per_row: u64,
    },
    /// Commit -> row applied in the double, at steady single-row commit rates.
    Latency {
        #[command(flatten)]
        shared: Shared,
        /// The double's completion delays, in milliseconds.
        #[arg(long, value_delimiter = ',', default_value = "0,20")]
        delays_ms: Vec<u64>,
        /// Commits per second of the writer; `max`: as fast as one connection commits.
        #[arg(long, value_delimiter = ',', default_value = "20,500,max", value_parser = Rate::parse)]
        rates: Vec<Rate>,
        /// Measured seconds of writing per run.
        #[arg(long, default_value_t = 10)]
        secs: u64,
        /// Seconds of writing before the measured ones (written and checked, not measured).
        #[arg(long, default_value_t = 2)]
        warmup_secs: u64,
        /// Runs of each binary, delay and rate; the summary shows the medians.
        #[arg(long, default_value_t = 1)]
        repeat: u32,
    },
    /// A table added while another streams: the other's commit -> applied latency during
    /// the copy, the snapshots slotline holds, the copy against `psql COPY` (issue 30).
    AddTable {
        #[command(flatten)]
        shared: Shared,
        /// Rows of the added table `items`.
        #[arg(long, default_value_t = 800_000)]
        rows: u64,
        /// Rows of the streaming table `users` before the writer starts.
        #[arg(long, default_value_t = 10_000)]
        users_rows: u64,
        /// Commits per second of the `users` writer during the copy.
        #[arg(long, default_value_t = 50)]
        rate: u32,
        /// Seconds the writer goes on after the copy's end.
        #[arg(long, default_value_t = 5)]
        after_secs: u64,
        /// Copy modes, each run for every shell: online (chunks beside the stream),
        /// exported (REPLICA IDENTITY FULL forces the exported snapshot's copy).
        #[arg(long, value_delimiter = ',', default_value = "online,exported")]
        modes: Vec<String>,
        /// Also write the runs as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// CPU of caught-up, idle connectors, and the binaries' sizes.
    Idle {
        #[command(flatten)]
        shared: Shared,
        #[arg(long, default_value_t = 60)]
        idle_secs: u64,
    },
}

/// The runs' `FELDERA_DURABILITY` values, checked: a checkpointing run needs a double
/// with fault tolerance (without, the connector exits 1 at its first checkpoint).
fn durabilities(
    listed: Vec<String>,
    fault_tolerance: Option<&str>,
) -> Result<Vec<Option<String>>, String> {
    if listed.is_empty() {
        return Ok(vec![None]);
    }
    let tolerant = fault_tolerance.is_some_and(|m| !m.eq_ignore_ascii_case("none"));
    for d in &listed {
        match d.as_str() {
            "completion" | "auto" => {}
            "checkpoint" if tolerant => {}
            "checkpoint" => {
                return Err(
                    "--durability checkpoint needs --fault-tolerance at_least_once or exactly_once"
                        .to_owned(),
                )
            }
            other => {
                return Err(format!(
                    "unknown durability {other:?}: accepted are auto, checkpoint, completion"
                ))
            }
        }
    }
    Ok(listed.into_iter().map(Some).collect())
}

fn parse_pair(raw: &str) -> Result<(String, String), String> {
    raw.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("{raw:?} is not KEY=VALUE"))
}

fn main() -> ExitCode {
    let args = Args::parse();
    match std::panic::catch_unwind(|| run(args)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(why)) => {
            eprintln!("e2e-bench failed: {why}");
            ExitCode::from(1)
        }
        Err(_) => {
            eprintln!("e2e-bench failed (the panic message is above)");
            ExitCode::from(1)
        }
    }
}

impl Shared {
    fn shells(&self) -> Vec<Shell> {
        self.shell.map_or(Shell::BOTH.to_vec(), |s| vec![s])
    }

    fn binaries(&self) -> Result<Vec<Binary>, String> {
        bench::binaries(
            &self.shells(),
            self.binaries.as_deref(),
            self.baseline.as_deref(),
        )
    }

    fn common(&self) -> Common {
        Common {
            extra: self.extra.clone(),
            log_dir: self.log_dir.clone(),
            wrapper: self
                .wrapper
                .as_deref()
                .map(|w| w.split_whitespace().map(str::to_owned).collect())
                .unwrap_or_default(),
        }
    }
}

fn run(args: Args) -> Result<(), String> {
    println!(
        "started {}, load average {}",
        bench::utc_now(),
        bench::load_average()
    );
    let pg = PgCluster::start_with(
        ClusterOptions::default()
            .setting("max_replication_slots", "60")
            .setting("max_wal_senders", "60"),
    );
    match args.suite {
        Suite::Stream {
            shared,
            workloads,
            commits,
            txns,
            txn_rows,
            big_rows,
            delays_ms,
            max_in_flight_batches,
            durability,
            fault_tolerance,
        } => {
            let workloads = workloads
                .iter()
                .map(|w| match w.as_str() {
                    "commits" => Ok(Workload::Commits(commits)),
                    "txns" => Ok(Workload::Txns {
                        count: txns,
                        rows: txn_rows,
                    }),
                    "one-txn" => Ok(Workload::OneTxn(big_rows)),
                    other => Err(format!(
                        "unknown workload {other:?}: accepted are commits, txns, one-txn"
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let binaries = shared.binaries()?;
            let windows = match max_in_flight_batches.is_empty() {
                true => vec![None],
                false => max_in_flight_batches.into_iter().map(Some).collect(),
            };
            let durabilities = durabilities(durability, fault_tolerance.as_deref())?;
            let args = StreamArgs {
                binaries,
                workloads,
                delays_ms,
                windows,
                durabilities,
                fault_tolerance,
                common: shared.common(),
            };
            let runs = bench::stream::run(&pg, &args)?;
            print_header(&pg, &args.binaries, &args.common);
            if args.durabilities.iter().any(Option::is_some) {
                println!(
                    "- Feldera double: fault tolerance {}, checkpoints take {} ms; FELDERA_CHECKPOINT_INTERVAL_SECS={}",
                    args.fault_tolerance.as_deref().unwrap_or("none"),
                    DEFAULT_CHECKPOINT_DELAY.as_millis(),
                    bench::setting(&args.common, "FELDERA_CHECKPOINT_INTERVAL_SECS"),
                );
            }
            bench::stream::print_summary(&runs);
        }
        Suite::Snapshot {
            shared,
            narrow_rows,
            wide_rows,
            workers,
            sinks,
        } => {
            let sinks = sinks
                .iter()
                .map(|s| Sink::parse(s))
                .collect::<Result<Vec<_>, _>>()?;
            let args = SnapshotArgs {
                binaries: shared.binaries()?,
                narrow_rows,
                wide_rows,
                workers,
                sinks,
                common: shared.common(),
            };
            let runs = bench::snapshot::run(&pg, &args)?;
            print_header(&pg, &args.binaries, &args.common);
            bench::snapshot::print_summary(&runs);
        }
        Suite::Retract {
            shared,
            rows,
            scenarios,
            scan_ns_per_row,
        } => {
            let scenarios = scenarios
                .iter()
                .map(|s| Scenario::parse(s))
                .collect::<Result<Vec<_>, _>>()?;
            let args = RetractArgs {
                binaries: shared.binaries()?,
                rows,
                scenarios,
                scan_ns_per_row,
                common: shared.common(),
            };
            let runs = bench::retract::run(&pg, &args)?;
            print_header(&pg, &args.binaries, &args.common);
            println!(
                "- Feldera double: every query scans all of r; scan cost {} ns per row; RETRACT_PAGE_ROWS={}, QUERY_TIMEOUT_SECS={}",
                args.scan_ns_per_row,
                bench::setting(&args.common, "RETRACT_PAGE_ROWS"),
                bench::setting(&args.common, "QUERY_TIMEOUT_SECS"),
            );
            bench::retract::print_summary(&runs);
        }
        Suite::Latency {
            shared,
            delays_ms,
            rates,
            secs,
            warmup_secs,
            repeat,
        } => {
            let args = LatencyArgs {
                binaries: shared.binaries()?,
                delays_ms,
                rates,
                measured: Duration::from_secs(secs),
                warmup: Duration::from_secs(warmup_secs),
                repeat: repeat.max(1),
                common: shared.common(),
            };
            let runs = bench::latency::run(&pg, &args)?;
            print_header(&pg, &args.binaries, &args.common);
            bench::latency::print_settings(&args);
            bench::latency::print_summary(&runs, args.repeat);
        }
        Suite::AddTable {
            shared,
            rows,
            users_rows,
            rate,
            after_secs,
            modes,
            json,
        } => {
            let modes = modes
                .iter()
                .map(|m| Mode::parse(m))
                .collect::<Result<Vec<_>, _>>()?;
            let args = AddTableArgs {
                binaries: shared.binaries()?,
                modes,
                rows,
                users_rows,
                rate: rate.max(1),
                after: Duration::from_secs(after_secs),
                json,
                common: shared.common(),
            };
            let runs = bench::add_table::run(&pg, &args)?;
            print_header(&pg, &args.binaries, &args.common);
            bench::add_table::print_settings(&args);
            bench::add_table::print_summary(&runs);
        }
        Suite::Idle { shared, idle_secs } => {
            let binaries = shared.binaries()?;
            let common = shared.common();
            let idle = bench::idle::run(&pg, &binaries, &common, Duration::from_secs(idle_secs))?;
            print_header(&pg, &binaries, &common);
            bench::idle::print_summary(&binaries, &idle, idle_secs);
        }
    }
    Ok(())
}

/// The machine, PostgreSQL and the connector settings in effect.
fn print_header(pg: &PgCluster, binaries: &[Binary], common: &Common) {
    println!("\n## summary\n");
    for line in bench::machine() {
        println!("- {line}");
    }
    println!("- {}", pg.psql("postgres", "SELECT version()"));
    let settings: Vec<String> = [
        "BATCH_MAX_ROWS",
        "BATCH_MAX_BYTES",
        "BATCH_LINGER_MS",
        "FELDERA_ACK_MODE",
    ]
    .iter()
    .map(|name| format!("{name}={}", bench::setting(common, name)))
    .collect();
    println!("- connector settings: {}", settings.join(", "));
    for binary in binaries {
        let window = match bench::knows_variable(&binary.path, "MAX_IN_FLIGHT_BATCHES") {
            true => "honours MAX_IN_FLIGHT_BATCHES",
            false => "does not know MAX_IN_FLIGHT_BATCHES: one batch in flight",
        };
        println!(
            "- {}: {} ({:?} shell; {window})",
            binary.label,
            binary.path.display(),
            binary.shell
        );
    }
    if !common.extra.is_empty() {
        println!("- extra variables: {:?}", common.extra);
    }
}
