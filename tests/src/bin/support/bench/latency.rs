//! The latency suite: how long a single-row commit takes to show in Feldera while a writer
//! commits at a steady rate, per connector binary.
//!
//! Every run has its own Feldera double (the run's completion delay, apply stamps on), its
//! own slot (created by the connector, `SNAPSHOT_MODE=never`) and state directory, and the
//! product's connector settings unless `--env` says otherwise. Once the connector streams,
//! a writer in this process commits single-row autocommit INSERTs into `t` through one psql
//! session, first for the warm-up (written and checked, not measured), then for the
//! measured seconds. A rate paces the INSERTs by absolute deadlines (the k-th is due at
//! start + k / rate, none skipped, so a late one is followed by the next at once); `max`
//! sends each as soon as the one before committed.
//!
//! A row's latency is the instant the double showed it (it parsed the record and the row
//! became visible: `FelderaDouble::apply_times`) minus the instant just before the writer
//! handed its INSERT to psql. Both come from this process's monotonic clock (the double runs
//! in-process); the difference is an upper bound of commit -> applied, as it includes the
//! INSERT's own trip through psql to PostgreSQL and its commit.
//!
//! After the writing the suite waits up to 30 s for the tail; every id written must then be
//! in the double, and those that are not are reported as lost. Within each delay and rate
//! the binaries alternate run by run (repeats included), so a before/after comparison
//! shares the machine's drift.
//!
//! Owns: the writer, the runs and their report. Never asserts a figure.

use super::{Binary, Common, Launched};
use crate::support::{self, Psql};
use serde_json::json;
use slotline_tests::feldera_double::{CompletionDelay, DoubleConfig, FelderaDouble};
use slotline_tests::pg::PgCluster;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const DATABASE: &str = "latency";
/// How long the rows still on their way after the writing may take to arrive.
const TAIL_TIMEOUT: Duration = Duration::from_secs(30);

/// A writer's commit rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rate {
    /// This many commits per second.
    PerSec(u32),
    /// Each commit as soon as the one before returned.
    Max,
}

impl Rate {
    pub fn parse(raw: &str) -> Result<Rate, String> {
        match raw {
            "max" => Ok(Rate::Max),
            n => match n.parse::<u32>() {
                Ok(n) if n > 0 => Ok(Rate::PerSec(n)),
                _ => Err(format!(
                    "{raw:?} is not a rate: a positive number of commits/s, or max"
                )),
            },
        }
    }

    fn label(self) -> String {
        match self {
            Rate::PerSec(n) => format!("{n}/s"),
            Rate::Max => "max".to_owned(),
        }
    }
}

/// What the suite runs.
#[derive(Debug)]
pub struct LatencyArgs {
    pub binaries: Vec<Binary>,
    pub delays_ms: Vec<u64>,
    pub rates: Vec<Rate>,
    /// Writing measured per run.
    pub measured: Duration,
    /// Writing before the measured part.
    pub warmup: Duration,
    /// Runs per binary, delay and rate.
    pub repeat: u32,
    pub common: Common,
}

/// One measured run.
#[derive(Debug)]
pub struct LatencyRun {
    /// The binary's label (`Binary::label`).
    pub binary: String,
    pub delay_ms: u64,
    pub rate: Rate,
    /// Commits per second the writer achieved in the measured part.
    pub achieved: f64,
    /// Rows written in the measured part (each one latency).
    pub measured_rows: u64,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    /// Ids written (warm-up included) that the double did not hold after the tail.
    pub lost: u64,
    /// Ingress requests answered during the measured part.
    pub ingress_requests: u64,
    /// Completion-status polls answered during the measured part.
    pub completion_polls: u64,
    /// Connector CPU (utime + stime) during the measured part.
    pub cpu_connector: f64,
    /// This process's CPU during the measured part: the double and the writer.
    pub cpu_bench: f64,
    /// The most an INSERT was sent after its deadline (0 with `max`).
    pub writer_late: Duration,
}

const TABLE_SQL: &str = "CREATE TABLE t (id bigint PRIMARY KEY, v text NOT NULL);
CREATE PUBLICATION p FOR TABLE t;";

fn schema() -> serde_json::Value {
    json!({"inputs": [{"name": "t", "case_sensitive": false, "primary_key": ["id"],
        "materialized": false, "properties": {}, "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "v", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": false}}]}],
        "outputs": []})
}

/// Runs every delay, rate, repeat and binary, in that nesting; returns the runs as measured.
pub fn run(pg: &PgCluster, args: &LatencyArgs) -> Result<Vec<LatencyRun>, String> {
    let db = pg.create_database(DATABASE);
    pg.psql(&db, TABLE_SQL);
    let mut runs = Vec::new();
    // Ids go on from run to run: each run's double starts empty and sees only its own.
    let mut next_id = 1;
    for delay_ms in &args.delays_ms {
        for rate in &args.rates {
            for _ in 0..args.repeat {
                for binary in &args.binaries {
                    let slot = format!("lat_{}", runs.len());
                    let (run, after) =
                        measure(pg, &db, args, binary, *delay_ms, *rate, &slot, next_id)?;
                    next_id = after;
                    print_run(&run);
                    runs.push(run);
                }
            }
        }
    }
    Ok(runs)
}

/// One run; returns it and the next unused id.
#[allow(clippy::too_many_arguments)]
fn measure(
    pg: &PgCluster,
    db: &str,
    args: &LatencyArgs,
    binary: &Binary,
    delay_ms: u64,
    rate: Rate,
    slot: &str,
    first_id: i64,
) -> Result<(LatencyRun, i64), String> {
    let feldera = FelderaDouble::start(
        DoubleConfig::new("demo", schema())
            .with_completion_delay(CompletionDelay::Fixed(Duration::from_millis(delay_ms)))
            .with_apply_times(true),
    )
    .map_err(|e| format!("start the double: {e}"))?;
    let state_dir = super::state_dir(slot)?;
    let mut vars = support::connector_vars(&pg.url(db), &feldera.base_url(), "p", "t", &state_dir);
    vars.push(("PG_SLOT".to_owned(), slot.to_owned()));
    let mut psql = Psql::connect(pg.port(), db)?;
    let mut writer = Psql::connect(pg.port(), db)?;
    let mut connector = Launched::start(&args.common, &binary.path, slot, vars, state_dir)?;
    super::poll_until(
        Duration::from_secs(60),
        Duration::from_millis(10),
        "the connector to stream",
        || {
            connector.check_running()?;
            psql.slot_active(slot)
        },
    )
    .map_err(|e| connector.failure(&e))?;
    let warm = write(&mut writer, rate, args.warmup, first_id, false)?;
    let pid = connector.pid();
    let cpu_before = (
        super::cpu_seconds(pid),
        super::cpu_seconds(std::process::id()),
    );
    let counts_before = feldera.request_counts();
    let measured = write(&mut writer, rate, args.measured, warm.next_id, true)?;
    let cpu_connector = super::cpu_seconds(pid) - cpu_before.0;
    let cpu_bench = super::cpu_seconds(std::process::id()) - cpu_before.1;
    let counts_after = feldera.request_counts();
    let during = |endpoint: &str| {
        let count = |counts: &BTreeMap<String, u64>| counts.get(endpoint).copied().unwrap_or(0);
        count(&counts_after) - count(&counts_before)
    };
    connector.check_running()?;
    let written = (measured.next_id - first_id) as usize;
    // Lost rows are reported, not fatal: the wait ends either way.
    let _ = super::poll_until(TAIL_TIMEOUT, Duration::from_millis(5), "the tail", || {
        Ok(feldera.row_count("t").unwrap_or(0) >= written)
    });
    // Stops it and removes its state directory.
    drop(connector);
    drop_slot(&mut psql, slot)?;
    let applied = first_applied(&feldera)?;
    let lost = (first_id..measured.next_id)
        .filter(|id| !applied.contains_key(id))
        .count() as u64;
    let mut latencies: Vec<Duration> = measured
        .sent
        .iter()
        .filter_map(|(id, sent)| {
            applied
                .get(id)
                .map(|at| at.saturating_duration_since(*sent))
        })
        .collect();
    latencies.sort_unstable();
    let run = LatencyRun {
        binary: binary.label.clone(),
        delay_ms,
        rate,
        achieved: measured.sent.len() as f64 / measured.elapsed.as_secs_f64(),
        measured_rows: measured.sent.len() as u64,
        p50: percentile(&latencies, 0.50),
        p99: percentile(&latencies, 0.99),
        max: latencies.last().copied().unwrap_or_default(),
        lost,
        ingress_requests: during("ingress"),
        completion_polls: during("completion_status"),
        cpu_connector,
        cpu_bench,
        writer_late: warm.late.max(measured.late),
    };
    Ok((run, measured.next_id))
}

/// What one stretch of writing did.
#[derive(Debug)]
struct Written {
    /// (id, the instant just before its INSERT went to psql); empty unless recorded.
    sent: Vec<(i64, Instant)>,
    next_id: i64,
    /// From the stretch's start to the last commit's return, at least the stretch's length.
    elapsed: Duration,
    /// The most an INSERT was sent after its deadline.
    late: Duration,
}

/// Commits one-row INSERTs from `first_id` on at `rate` for `length`, recording each one's
/// send instant when `record`.
fn write(
    psql: &mut Psql,
    rate: Rate,
    length: Duration,
    first_id: i64,
    record: bool,
) -> Result<Written, String> {
    let start = Instant::now();
    let end = start + length;
    let mut sent = Vec::new();
    let mut late = Duration::ZERO;
    let mut id = first_id;
    for k in 0u64.. {
        let now = Instant::now();
        match rate {
            Rate::PerSec(n) => {
                let due = start + Duration::from_secs_f64(k as f64 / f64::from(n));
                if due >= end {
                    break;
                }
                match due.checked_duration_since(now) {
                    Some(wait) => std::thread::sleep(wait),
                    None => late = late.max(now - due),
                }
            }
            Rate::Max if now >= end => break,
            Rate::Max => {}
        }
        let before = Instant::now();
        psql.query(&format!("INSERT INTO t VALUES ({id}, 'v{id}')"))?;
        if record {
            sent.push((id, before));
        }
        id += 1;
    }
    Ok(Written {
        sent,
        next_id: id,
        elapsed: start.elapsed().max(length),
        late,
    })
}

/// When the double first showed each id of `t`.
fn first_applied(feldera: &FelderaDouble) -> Result<BTreeMap<i64, Instant>, String> {
    let stamps = feldera.apply_times("t").ok_or("no table t in the double")?;
    let mut first = BTreeMap::new();
    for (key, at) in stamps {
        let id = key[0]
            .as_i64()
            .ok_or_else(|| format!("a key of t that is not a bigint: {key}"))?;
        first.entry(id).or_insert(at);
    }
    Ok(first)
}

/// Drops the stopped connector's slot, waiting for its walsender to let go.
fn drop_slot(psql: &mut Psql, slot: &str) -> Result<(), String> {
    super::poll_until(
        Duration::from_secs(10),
        Duration::from_millis(20),
        "the slot to be dropped",
        || {
            psql.query(&format!(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                 WHERE slot_name = '{slot}' AND NOT active"
            ))?;
            Ok(psql.slot_confirmed(slot)?.is_none())
        },
    )
}

/// The nearest-rank percentile of sorted `values` (zero when empty).
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn print_run(r: &LatencyRun) {
    println!(
        "{:<22} delay {:>3} ms rate {:<6}: {:>7.1} commits/s, {} rows; p50 {:.1} ms, p99 {:.1} ms, \
         max {:.1} ms; lost {}; {} ingress, {} polls; CPU s connector {:.2}, this process (double \
         and writer) {:.2}; writer late by up to {:.1} ms; load {}",
        r.binary,
        r.delay_ms,
        r.rate.label(),
        r.achieved,
        r.measured_rows,
        ms(r.p50),
        ms(r.p99),
        ms(r.max),
        r.lost,
        r.ingress_requests,
        r.completion_polls,
        r.cpu_connector,
        r.cpu_bench,
        ms(r.writer_late),
        super::load_average(),
    );
}

/// The writer and the connector settings of every run.
pub fn print_settings(args: &LatencyArgs) {
    println!(
        "- latency: one psql session commits single-row INSERTs (autocommit), paced by absolute \
         deadlines; {} s warm-up (not measured), then {} s measured per run; latency = the \
         double showed the row - just before its INSERT was sent (an upper bound of commit -> \
         applied); BATCH_LINGER_MS={}, MAX_IN_FLIGHT_BATCHES={}; {} run(s) per cell",
        args.warmup.as_secs(),
        args.measured.as_secs(),
        super::setting(&args.common, "BATCH_LINGER_MS"),
        super::setting(&args.common, "MAX_IN_FLIGHT_BATCHES"),
        args.repeat,
    );
}

/// The median of `values` (the lower middle of an even count; zero when empty).
fn median<T: Copy + PartialOrd + Default>(mut values: Vec<T>) -> T {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    values
        .get(values.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or_default()
}

/// The summary table (Markdown): one row per delay, rate and binary, the medians of its
/// repeats (the maximum of their maxima, the sum of their losses).
pub fn print_summary(runs: &[LatencyRun], repeat: u32) {
    let mut cells: Vec<(u64, Rate, &str)> = Vec::new();
    for r in runs {
        let cell = (r.delay_ms, r.rate, r.binary.as_str());
        if !cells.contains(&cell) {
            cells.push(cell);
        }
    }
    let of = match repeat {
        1 => String::new(),
        n => format!(", median of {n}"),
    };
    println!(
        "\n| delay | rate asked | binary | commits/s achieved{of} | p50 (ms){of} | p99 (ms){of} | max (ms) | rows measured | rows lost | ingress requests{of} | connector CPU s{of} |"
    );
    println!("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (delay_ms, rate, binary) in cells {
        let group: Vec<&LatencyRun> = runs
            .iter()
            .filter(|r| r.delay_ms == delay_ms && r.rate == rate && r.binary == binary)
            .collect();
        let pick = |f: fn(&LatencyRun) -> f64| median(group.iter().map(|r| f(r)).collect());
        println!(
            "| {delay_ms} ms | {} | {binary} | {:.1} | **{:.1}** | **{:.1}** | {:.1} | {} | {} | {:.0} | {:.2} |",
            rate.label(),
            pick(|r| r.achieved),
            pick(|r| ms(r.p50)),
            pick(|r| ms(r.p99)),
            group.iter().map(|r| ms(r.max)).fold(0.0, f64::max),
            group.iter().map(|r| r.measured_rows).sum::<u64>(),
            group.iter().map(|r| r.lost).sum::<u64>(),
            pick(|r| r.ingress_requests as f64),
            pick(|r| r.cpu_connector),
        );
    }
}
