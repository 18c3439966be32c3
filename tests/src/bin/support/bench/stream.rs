//! The streaming suite: how long a connector takes to catch up on WAL that is already
//! written, as a ratio of `pg_recvlogical`'s time on the same WAL.
//!
//! Per workload: one database, table and publication; one logical slot (pgoutput) for every
//! measured connector run and one for its `pg_recvlogical` baseline, all created before the
//! rows are written, so every reader decodes exactly the same WAL. Then, run after run, the
//! baseline reads its slot to the end (`pg_recvlogical --endpos END -f /dev/null`), and right
//! after it a connector (fresh process, fresh Feldera double with the run's completion
//! delay) streams from its own slot until the slot's `confirmed_flush_lsn` reaches END (the
//! WAL position read right after the writes). Each ratio divides two times measured one
//! after the other, so the machine's load drifts little between them.
//!
//! With durabilities (`--durability completion,checkpoint`), every binary runs once per
//! `FELDERA_DURABILITY`, one right after the other, against a double with the fault
//! tolerance asked for; such a run also records when the double had processed every row
//! and the checkpoints it was asked for, so the slot's lag behind Feldera shows.
//!
//! Owns: the workloads and the streaming runs. Never asserts a figure.

use super::{cpu_per_100k, mib, Binary, Common, Launched};
use crate::support::{self, Psql};
use serde_json::json;
use slotline_tests::feldera_double::{
    CheckpointCounts, CompletionDelay, DoubleConfig, FelderaDouble,
};
use slotline_tests::pg::{find_pg_bin, PgCluster};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long one connector run may take before the suite gives up.
const RUN_TIMEOUT: Duration = Duration::from_secs(900);

/// A streaming workload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Workload {
    /// Single-row transactions.
    Commits(u64),
    /// `count` transactions of `rows` rows each.
    Txns { count: u64, rows: u64 },
    /// One transaction.
    OneTxn(u64),
}

impl Workload {
    pub fn rows(self) -> u64 {
        match self {
            Workload::Commits(n) | Workload::OneTxn(n) => n,
            Workload::Txns { count, rows } => count * rows,
        }
    }

    pub fn label(self) -> String {
        match self {
            Workload::Commits(n) => format!("{n} x 1-row commits"),
            Workload::Txns { count, rows } => format!("{count} x {rows}-row txns"),
            Workload::OneTxn(n) => format!("1 x {n}-row txn"),
        }
    }

    fn sql(self) -> String {
        match self {
            Workload::Commits(n) => format!("CALL txns({n}, 1)"),
            Workload::Txns { count, rows } => format!("CALL txns({count}, {rows})"),
            Workload::OneTxn(n) => format!("CALL txns(1, {n})"),
        }
    }
}

/// What the suite runs.
#[derive(Debug)]
pub struct StreamArgs {
    pub binaries: Vec<Binary>,
    pub workloads: Vec<Workload>,
    pub delays_ms: Vec<u64>,
    /// `MAX_IN_FLIGHT_BATCHES` values; `None` leaves the product default.
    pub windows: Vec<Option<u32>>,
    /// `FELDERA_DURABILITY` values, run one after the other for each binary; `None` leaves
    /// the variable unset and the double unwatched (the suite as it was).
    pub durabilities: Vec<Option<String>>,
    /// The double's fault-tolerance model (`None`: none, the double's default).
    pub fault_tolerance: Option<String>,
    pub common: Common,
}

impl StreamArgs {
    /// Whether runs record the double's progress and checkpoints.
    fn watches_feldera(&self) -> bool {
        self.durabilities.iter().any(Option::is_some)
    }
}

/// What a run with a durability saw of the double.
#[derive(Debug)]
pub struct FelderaSide {
    /// `FELDERA_DURABILITY` of the run.
    pub durability: String,
    /// Connector start → the double had processed every row (polled every 5 ms, like the
    /// slot).
    pub complete: Duration,
    /// The double's checkpoint counts when the slot confirmed the end.
    pub checkpoints: CheckpointCounts,
}

/// One measured connector run and its baseline.
#[derive(Debug)]
pub struct StreamRun {
    pub workload: Workload,
    /// The binary's label (`Binary::label`).
    pub binary: String,
    pub delay_ms: u64,
    pub window: Option<u32>,
    /// `pg_recvlogical` on the same WAL, just before.
    pub baseline: Duration,
    /// Connector start → slot confirmed END.
    pub total: Duration,
    pub peak_rss_kib: u64,
    pub ingress_requests: u64,
    pub completion_polls: u64,
    pub cpu_connector: f64,
    pub cpu_walsender: f64,
    /// This process, which hosts the double.
    pub cpu_double: f64,
    /// With a durability only.
    pub feldera: Option<FelderaSide>,
}

impl StreamRun {
    pub fn ratio(&self) -> f64 {
        self.total.as_secs_f64() / self.baseline.as_secs_f64()
    }

    /// How long the slot's confirmation trailed the double's processing.
    pub fn lag(&self) -> Option<Duration> {
        self.feldera
            .as_ref()
            .map(|f| self.total.saturating_sub(f.complete))
    }
}

const TABLE_SQL: &str = "CREATE TABLE t (id bigint PRIMARY KEY, v text NOT NULL);
CREATE PUBLICATION p FOR TABLE t;
CREATE PROCEDURE txns(count int, size int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 0 .. count - 1 LOOP
    INSERT INTO t SELECT g, 'v' || g FROM generate_series(i * size + 1, (i + 1) * size) g;
    COMMIT;
  END LOOP;
END $$;";

fn schema() -> serde_json::Value {
    json!({"inputs": [{"name": "t", "case_sensitive": false, "primary_key": ["id"],
        "materialized": false, "properties": {}, "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "v", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": false}}]}],
        "outputs": []})
}

/// One planned connector run.
#[derive(Debug)]
struct Plan {
    binary: Binary,
    delay_ms: u64,
    window: Option<u32>,
    durability: Option<String>,
    slot: String,
    baseline_slot: String,
}

/// Runs every workload; returns every run in the order measured.
pub fn run(pg: &PgCluster, args: &StreamArgs) -> Result<Vec<StreamRun>, String> {
    let mut runs = Vec::new();
    for (index, workload) in args.workloads.iter().enumerate() {
        runs.extend(run_workload(pg, args, index, *workload)?);
    }
    Ok(runs)
}

fn run_workload(
    pg: &PgCluster,
    args: &StreamArgs,
    index: usize,
    workload: Workload,
) -> Result<Vec<StreamRun>, String> {
    let db = pg.create_database(&format!("stream_{index}"));
    pg.psql(&db, TABLE_SQL);
    let mut plans = Vec::new();
    for delay_ms in &args.delays_ms {
        for window in &args.windows {
            for binary in &args.binaries {
                for durability in &args.durabilities {
                    let n = plans.len();
                    plans.push(Plan {
                        binary: binary.clone(),
                        delay_ms: *delay_ms,
                        window: *window,
                        durability: durability.clone(),
                        slot: format!("c_{index}_{n}"),
                        baseline_slot: format!("r_{index}_{n}"),
                    });
                }
            }
        }
    }
    let mut psql = Psql::connect(pg.port(), &db)?;
    for plan in &plans {
        for slot in [&plan.slot, &plan.baseline_slot] {
            psql.query(&format!(
                "SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')"
            ))?;
        }
    }
    println!(
        "{}: {} slots created; writing (load average {})",
        workload.label(),
        plans.len() * 2,
        super::load_average()
    );
    let started = Instant::now();
    psql.query(&workload.sql())?;
    let end = psql.value("SELECT pg_current_wal_lsn()")?;
    println!(
        "{}: written in {:.2} s, WAL ends at {end}",
        workload.label(),
        started.elapsed().as_secs_f64()
    );
    let mut runs = Vec::new();
    for plan in &plans {
        let baseline = recvlogical(pg, &db, &plan.baseline_slot, &end);
        drop_slot(&mut psql, &plan.baseline_slot);
        let measured = baseline
            .and_then(|baseline| measure(pg, &db, &mut psql, args, workload, plan, &end, baseline));
        drop_slot(&mut psql, &plan.slot);
        let run = measured?;
        print_run(&run);
        runs.push(run);
    }
    drop(psql);
    pg.psql(
        "postgres",
        &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
    );
    Ok(runs)
}

fn drop_slot(psql: &mut Psql, slot: &str) {
    let _ = psql.query(&format!(
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
         WHERE slot_name = '{slot}' AND NOT active"
    ));
}

/// `pg_recvlogical` reading `slot` to `end`, its output discarded: its wall-clock time.
fn recvlogical(pg: &PgCluster, db: &str, slot: &str, end: &str) -> Result<Duration, String> {
    let program = find_pg_bin()?.join("pg_recvlogical");
    let mut command = Command::new(program);
    command
        .args(["-h", "127.0.0.1", "-p", &pg.port().to_string()])
        .args(["-U", "postgres", "-d", db, "--slot", slot])
        .args(["--start", "--no-loop", "--endpos", end, "-f", "/dev/null"])
        .args(["-o", "proto_version=1", "-o", "publication_names=p"]);
    super::time_command("pg_recvlogical", &mut command)
}

#[allow(clippy::too_many_arguments)]
fn measure(
    pg: &PgCluster,
    db: &str,
    psql: &mut Psql,
    args: &StreamArgs,
    workload: Workload,
    plan: &Plan,
    end: &str,
    baseline: Duration,
) -> Result<StreamRun, String> {
    let feldera = FelderaDouble::start(
        DoubleConfig::new("demo", schema())
            .with_completion_delay(CompletionDelay::Fixed(Duration::from_millis(plan.delay_ms))),
    )
    .map_err(|e| format!("start the double: {e}"))?;
    feldera
        .set_fault_tolerance(args.fault_tolerance.as_deref())
        .map_err(|e| format!("the double's fault tolerance: {e}"))?;
    let state_dir = super::state_dir(&plan.slot)?;
    let mut vars = support::connector_vars(&pg.url(db), &feldera.base_url(), "p", "t", &state_dir);
    vars.push(("PG_SLOT".to_owned(), plan.slot.clone()));
    if let Some(window) = plan.window {
        vars.push(("MAX_IN_FLIGHT_BATCHES".to_owned(), window.to_string()));
    }
    if let Some(durability) = &plan.durability {
        vars.push(("FELDERA_DURABILITY".to_owned(), durability.clone()));
    }
    let watch = args.watches_feldera();
    let rows = workload.rows();
    let mut complete = None;
    let double_cpu_before = super::cpu_seconds(std::process::id());
    let mut connector =
        Launched::start(&args.common, &plan.binary.path, &plan.slot, vars, state_dir)?;
    let confirmed = super::poll_until(
        RUN_TIMEOUT,
        Duration::from_millis(5),
        "the slot to confirm the end",
        || {
            connector.check_running()?;
            if watch && complete.is_none() && feldera.processed_records() >= rows {
                complete = Some(connector.started.elapsed());
            }
            psql.confirmed_at_least(&plan.slot, end)
        },
    );
    let total = connector.started.elapsed();
    if let Err(e) = confirmed {
        let at = psql.slot_confirmed(&plan.slot)?;
        return Err(connector.failure(&format!("{e} ({end}; the slot is at {at:?})")));
    }
    let pid = connector.pid();
    let walsender: u32 = psql
        .value(&format!(
            "SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = '{}'",
            plan.slot
        ))?
        .parse()
        .unwrap_or(0);
    let counts = feldera.request_counts();
    let feldera_side = plan.durability.as_ref().map(|durability| FelderaSide {
        durability: durability.clone(),
        // Confirmed before the poll saw every row processed: no later than confirmed.
        complete: complete.unwrap_or(total),
        checkpoints: feldera.checkpoint_counts(),
    });
    let run = StreamRun {
        workload,
        binary: plan.binary.label.clone(),
        delay_ms: plan.delay_ms,
        window: plan.window,
        baseline,
        total,
        peak_rss_kib: super::peak_rss_kib(pid)?,
        ingress_requests: counts.get("ingress").copied().unwrap_or(0),
        completion_polls: counts.get("completion_status").copied().unwrap_or(0),
        cpu_connector: super::cpu_seconds(pid),
        cpu_walsender: if walsender == 0 {
            0.0
        } else {
            super::cpu_seconds(walsender)
        },
        cpu_double: super::cpu_seconds(std::process::id()) - double_cpu_before,
        feldera: feldera_side,
    };
    connector.stop();
    check_rows(&feldera, workload.rows())?;
    Ok(run)
}

/// The double holds every row written, each once.
fn check_rows(feldera: &FelderaDouble, rows: u64) -> Result<(), String> {
    let table = feldera.table("t").ok_or("no table t in the double")?;
    let once = table.rows.iter().filter(|r| r.weight == 1).count() as u64;
    if once == rows && table.rows.len() as u64 == rows {
        Ok(())
    } else {
        Err(format!(
            "the double holds {} rows ({once} with weight 1), expected {rows}",
            table.rows.len()
        ))
    }
}

fn window_label(window: Option<u32>) -> String {
    window.map_or("default".to_owned(), |w| w.to_string())
}

fn print_run(r: &StreamRun) {
    let feldera = match (&r.feldera, r.lag()) {
        (Some(f), Some(lag)) => format!(
            "; {}: all processed by the double at {:.2} s, confirmed {:.2} s later, checkpoints {} requested / {} succeeded",
            f.durability,
            f.complete.as_secs_f64(),
            lag.as_secs_f64(),
            f.checkpoints.requested,
            f.checkpoints.succeeded,
        ),
        _ => String::new(),
    };
    println!(
        "{:<22} {:<24} delay {:>3} ms window {:<7}: pg_recvlogical {:>6.2} s, connector {:>6.2} s, \
         ratio {:.2}; peak RSS {}; {} ingress, {} polls; CPU s connector {:.2} ({:.2} per 100k rows), \
         walsender {:.2}, double {:.2}{feldera}; load {}",
        r.binary,
        r.workload.label(),
        r.delay_ms,
        window_label(r.window),
        r.baseline.as_secs_f64(),
        r.total.as_secs_f64(),
        r.ratio(),
        mib(r.peak_rss_kib),
        r.ingress_requests,
        r.completion_polls,
        r.cpu_connector,
        cpu_per_100k(r.cpu_connector, r.workload.rows()),
        r.cpu_walsender,
        r.cpu_double,
        super::load_average(),
    );
}

/// The summary table (Markdown).
pub fn print_summary(runs: &[StreamRun]) {
    println!("\n| workload | delay | window | binary | pg_recvlogical (s) | connector (s) | ratio | rows/s | peak RSS | ingress requests | connector CPU s (per 100k rows) | walsender CPU s | double CPU s |");
    println!("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|");
    for r in runs {
        println!(
            "| {} | {} ms | {} | {} | {:.2} | {:.2} | **{:.2}** | {:.0} | {} | {} | {:.2} ({:.2}) | {:.2} | {:.2} |",
            r.workload.label(),
            r.delay_ms,
            window_label(r.window),
            r.binary,
            r.baseline.as_secs_f64(),
            r.total.as_secs_f64(),
            r.ratio(),
            r.workload.rows() as f64 / r.total.as_secs_f64(),
            mib(r.peak_rss_kib),
            r.ingress_requests,
            r.cpu_connector,
            cpu_per_100k(r.cpu_connector, r.workload.rows()),
            r.cpu_walsender,
            r.cpu_double,
        );
    }
    if runs.iter().any(|r| r.feldera.is_some()) {
        print_durability(runs);
    }
}

/// With durabilities: when Feldera held every row, when the slot said so, and each
/// checkpoint run against the completion run of the same binary and settings.
fn print_durability(runs: &[StreamRun]) {
    println!("\n| workload | delay | window | binary | durability | complete in the double (s) | slot confirmed (s) | lag (s) | checkpoints requested / succeeded | ratio to pg_recvlogical | connector CPU s | peak RSS |");
    println!("|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in runs {
        let (Some(f), Some(lag)) = (&r.feldera, r.lag()) else {
            continue;
        };
        println!(
            "| {} | {} ms | {} | {} | {} | {:.2} | {:.2} | {:.2} | {} / {} | {:.2} | {:.2} | {} |",
            r.workload.label(),
            r.delay_ms,
            window_label(r.window),
            r.binary,
            f.durability,
            f.complete.as_secs_f64(),
            r.total.as_secs_f64(),
            lag.as_secs_f64(),
            f.checkpoints.requested,
            f.checkpoints.succeeded,
            r.ratio(),
            r.cpu_connector,
            mib(r.peak_rss_kib),
        );
    }
    println!("\n| workload | delay | window | binary | durability | complete: ratio to completion | confirmed: ratio to completion | CPU: ratio to completion |");
    println!("|---|---:|---:|---|---|---:|---:|---:|");
    for r in runs {
        let Some(f) = r.feldera.as_ref().filter(|f| f.durability != "completion") else {
            continue;
        };
        let Some((base, bf)) = runs.iter().find_map(|b| {
            let bf = b
                .feldera
                .as_ref()
                .filter(|bf| bf.durability == "completion")?;
            let same = b.workload == r.workload
                && b.delay_ms == r.delay_ms
                && b.window == r.window
                && b.binary == r.binary;
            same.then_some((b, bf))
        }) else {
            continue;
        };
        println!(
            "| {} | {} ms | {} | {} | {} | {:.2} | {:.2} | {:.2} |",
            r.workload.label(),
            r.delay_ms,
            window_label(r.window),
            r.binary,
            f.durability,
            f.complete.as_secs_f64() / bf.complete.as_secs_f64(),
            r.total.as_secs_f64() / base.total.as_secs_f64(),
            r.cpu_connector / base.cpu_connector.max(0.01),
        );
    }
}
