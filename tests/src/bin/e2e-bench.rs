//! `e2e-bench`: end-to-end throughput, peak memory and idle cost of the connector binaries
//! against a real PostgreSQL and the Feldera double.
//!
//! ```text
//! cargo build --release -p slotline -p slotline-blocking
//! cargo run --release -p slotline-tests --bin e2e-bench -- [--shell tokio|blocking]
//!     [--rows 100000] [--big-rows 1000000] [--delays-ms 0,20] [--idle-secs 60]
//! ```
//! Workloads, each on a fresh database, slot, double and connector process, with the
//! double completing every batch after each delay (`CompletionDelay::Fixed`):
//! - `commits`: `--rows` single-row transactions (a PL/pgSQL procedure that COMMITs
//!   after every insert);
//! - `one-txn`: one transaction of `--big-rows` rows (`INSERT ... SELECT generate_series`).
//!
//! The time runs from the moment the first row is written until the slot's
//! `confirmed_flush_lsn` reaches the WAL position read right after the last commit. Peak
//! RSS is the connector's `VmHWM` at the end of the run. Idle CPU is utime+stime of a
//! caught-up connector over `--idle-secs`. The shells alternate within each workload so
//! both see the same machine conditions.
//!
//! Owns: the workloads, the measurements and their printing. Never asserts a figure.

mod support;

use clap::Parser;
use serde_json::json;
use slotline_tests::e2e::Shell;
use slotline_tests::feldera_double::{CompletionDelay, DoubleConfig, FelderaDouble};
use slotline_tests::pg::{ClusterOptions, PgCluster};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use support::{ConnectorProcess, Psql};

#[derive(Debug, Parser)]
#[command(about = "End-to-end benchmark: PostgreSQL → slotline → Feldera double")]
struct Args {
    /// Only this shell (tokio or blocking); both when absent.
    #[arg(long, value_parser = support::parse_shell)]
    shell: Option<Shell>,
    /// Single-row transactions in the `commits` workload.
    #[arg(long, default_value_t = 100_000)]
    rows: u64,
    /// Rows of the one transaction in the `one-txn` workload.
    #[arg(long, default_value_t = 1_000_000)]
    big_rows: u64,
    /// Completion delays of the double to run each workload with, in milliseconds.
    #[arg(long, value_delimiter = ',', default_value = "0,20")]
    delays_ms: Vec<u64>,
    /// How long to measure the CPU of an idle, caught-up connector (0 skips it).
    #[arg(long, default_value_t = 60)]
    idle_secs: u64,
    /// Extra connector variables, e.g. `--env BATCH_LINGER_MS=0` (repeatable).
    #[arg(long = "env", value_parser = parse_pair)]
    extra: Vec<(String, String)>,
    /// Keep each connector's log in this directory (`bench_<n>.log`).
    #[arg(long)]
    log_dir: Option<PathBuf>,
}

fn parse_pair(raw: &str) -> Result<(String, String), String> {
    raw.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("{raw:?} is not KEY=VALUE"))
}

const RUN_TIMEOUT: Duration = Duration::from_secs(900);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Workload {
    Commits,
    OneTxn,
}

impl Workload {
    fn label(self) -> &'static str {
        match self {
            Workload::Commits => "commits",
            Workload::OneTxn => "one-txn",
        }
    }
}

/// One measured run.
#[derive(Debug)]
struct Run {
    shell: Shell,
    workload: Workload,
    delay_ms: u64,
    rows: u64,
    /// First row written → last commit returned.
    write: Duration,
    /// First row written → slot confirmed the last commit.
    total: Duration,
    peak_rss_kib: u64,
    ingress_requests: u64,
    completion_polls: u64,
    /// CPU seconds over the run: the connector, the walsender, this process (the double).
    cpu_connector: f64,
    cpu_walsender: f64,
    cpu_double: f64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match std::panic::catch_unwind(|| run(&args)) {
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

fn run(args: &Args) -> Result<(), String> {
    let shells: Vec<Shell> = args.shell.map_or(Shell::BOTH.to_vec(), |s| vec![s]);
    let mut binaries = Vec::new();
    for shell in &shells {
        binaries.push((*shell, support::connector_binary(*shell)?));
    }
    if !cfg!(debug_assertions) {
        println!("release build: figures are meaningful");
    } else {
        println!("WARNING: debug build; run with --release for figures");
    }
    println!("load average at the start: {}", load_average());
    let pg = PgCluster::start_with(
        ClusterOptions::default()
            .setting("max_replication_slots", "40")
            .setting("max_wal_senders", "40"),
    );
    let mut bench = Bench {
        pg: &pg,
        extra: args.extra.clone(),
        log_dir: args.log_dir.clone(),
        counter: 0,
    };
    let mut runs = Vec::new();
    for (workload, rows) in [
        (Workload::Commits, args.rows),
        (Workload::OneTxn, args.big_rows),
    ] {
        for delay in &args.delays_ms {
            for (shell, binary) in &binaries {
                let run = bench.measure(*shell, binary, workload, rows, *delay)?;
                print_run(&run);
                runs.push(run);
            }
        }
    }
    let idle = if args.idle_secs > 0 {
        bench.idle(&binaries, Duration::from_secs(args.idle_secs))?
    } else {
        Vec::new()
    };
    print_summary(&pg, &binaries, &runs, &idle, args)
}

/// What every run shares: the cluster and a counter for unique names.
struct Bench<'a> {
    pg: &'a PgCluster,
    extra: Vec<(String, String)>,
    log_dir: Option<PathBuf>,
    counter: u32,
}

const TABLE_SQL: &str = "CREATE TABLE t (id bigint PRIMARY KEY, v text NOT NULL);
CREATE PUBLICATION p FOR TABLE t;
CREATE PROCEDURE commits(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..n LOOP
    INSERT INTO t VALUES (i, 'v' || i);
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

/// A database, a double and a caught-up connector; removed on drop.
struct Stage<'a> {
    connector: ConnectorProcess,
    psql: Psql,
    feldera: FelderaDouble,
    pg: &'a PgCluster,
    db: String,
    slot: String,
    state_dir: PathBuf,
}

impl Drop for Stage<'_> {
    fn drop(&mut self) {
        self.connector.terminate(Duration::from_secs(10));
        self.connector.kill();
        let (slot, db) = (&self.slot, &self.db);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.pg.psql(
                "postgres",
                &format!(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                     WHERE slot_name = '{slot}' AND NOT active"
                ),
            );
            self.pg.psql(
                "postgres",
                &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
            );
        }));
        let _ = std::fs::remove_dir_all(&self.state_dir);
    }
}

impl<'a> Bench<'a> {
    fn stage(&mut self, binary: &Path, delay_ms: u64) -> Result<Stage<'a>, String> {
        self.counter += 1;
        let name = format!("bench_{}", self.counter);
        let db = self.pg.create_database(&name);
        self.pg.psql(&db, TABLE_SQL);
        let feldera = FelderaDouble::start(
            DoubleConfig::new("demo", schema())
                .with_completion_delay(CompletionDelay::Fixed(Duration::from_millis(delay_ms))),
        )
        .map_err(|e| format!("start the double: {e}"))?;
        let state_dir =
            std::env::temp_dir().join(format!("slotline-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&state_dir).map_err(|e| e.to_string())?;
        let mut vars =
            support::connector_vars(&self.pg.url(&db), &feldera.base_url(), "p", "t", &state_dir);
        vars.push(("PG_SLOT".to_owned(), name.clone()));
        vars.extend(self.extra.iter().cloned());
        let (log, keep) = match &self.log_dir {
            Some(dir) => (dir.join(format!("{name}.log")), true),
            None => (state_dir.join("connector.log"), false),
        };
        let connector = ConnectorProcess::spawn(binary, &vars, log, keep)?;
        let psql = Psql::connect(self.pg.port(), &db)?;
        let mut stage = Stage {
            connector,
            psql,
            feldera,
            pg: self.pg,
            db,
            slot: name,
            state_dir,
        };
        stage.wait_streaming(Duration::from_secs(60))?;
        stage.wait_caught_up(Duration::from_secs(60))?;
        Ok(stage)
    }

    fn measure(
        &mut self,
        shell: Shell,
        binary: &Path,
        workload: Workload,
        rows: u64,
        delay_ms: u64,
    ) -> Result<Run, String> {
        let mut stage = self.stage(binary, delay_ms)?;
        let sql = match workload {
            Workload::Commits => format!("CALL commits({rows})"),
            Workload::OneTxn => {
                format!("INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, {rows}) g")
            }
        };
        let walsender = stage.walsender_pid()?;
        let cpu_before = [
            cpu_seconds(stage.connector.pid()),
            cpu_seconds(walsender),
            cpu_seconds(std::process::id()),
        ];
        let started = Instant::now();
        stage.psql.query(&sql)?;
        let write = started.elapsed();
        stage.wait_caught_up(RUN_TIMEOUT)?;
        let total = started.elapsed();
        let cpu = |i: usize, pid: u32| cpu_seconds(pid) - cpu_before[i];
        let run = Run {
            shell,
            workload,
            delay_ms,
            rows,
            write,
            total,
            peak_rss_kib: peak_rss_kib(stage.connector.pid())?,
            ingress_requests: stage
                .feldera
                .request_counts()
                .get("ingress")
                .copied()
                .unwrap_or(0),
            completion_polls: stage
                .feldera
                .request_counts()
                .get("completion_status")
                .copied()
                .unwrap_or(0),
            cpu_connector: cpu(0, stage.connector.pid()),
            cpu_walsender: cpu(1, walsender),
            cpu_double: cpu(2, std::process::id()),
        };
        stage.check_rows(rows)?;
        Ok(run)
    }

    /// CPU of idle, caught-up connectors (all shells at once, over the same interval).
    fn idle(
        &mut self,
        binaries: &[(Shell, PathBuf)],
        duration: Duration,
    ) -> Result<Vec<(Shell, f64, u64)>, String> {
        let mut stages = Vec::new();
        for (shell, binary) in binaries {
            stages.push((*shell, self.stage(binary, 0)?));
        }
        println!(
            "idle: measuring {} s of CPU of caught-up connectors",
            duration.as_secs()
        );
        let before: Vec<f64> = stages
            .iter()
            .map(|(_, s)| cpu_seconds(s.connector.pid()))
            .collect();
        std::thread::sleep(duration);
        let mut out = Vec::new();
        for ((shell, stage), before) in stages.iter_mut().zip(before) {
            if let Some(code) = stage.connector.exit_code() {
                return Err(stage.failure(&format!("connector exited with {code} while idle")));
            }
            let pid = stage.connector.pid();
            out.push((*shell, cpu_seconds(pid) - before, current_rss_kib(pid)?));
        }
        Ok(out)
    }
}

impl Stage<'_> {
    fn wait_caught_up(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let target = self.psql.value("SELECT pg_current_wal_lsn()")?;
        loop {
            if let Some(code) = self.connector.exit_code() {
                return Err(self.failure(&format!("connector exited with {code}")));
            }
            if self.psql.confirmed_at_least(&self.slot, &target)? {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let at = self.psql.slot_confirmed(&self.slot)?;
                return Err(self.failure(&format!(
                    "slot {} did not reach {target} (it is at {at:?})",
                    self.slot
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn wait_streaming(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        while !self.psql.slot_active(&self.slot)? {
            if let Some(code) = self.connector.exit_code() {
                return Err(self.failure(&format!("connector exited with {code}")));
            }
            if Instant::now() >= deadline {
                return Err(self.failure("the connector did not start streaming"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    fn walsender_pid(&mut self) -> Result<u32, String> {
        let pid = self.psql.value(&format!(
            "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '{}'",
            self.slot
        ))?;
        pid.parse()
            .map_err(|_| format!("slot {} has no active walsender ({pid:?})", self.slot))
    }

    /// The double holds every row written, each once.
    fn check_rows(&self, rows: u64) -> Result<(), String> {
        let table = self.feldera.table("t").ok_or("no table t in the double")?;
        let held = table.rows.iter().filter(|r| r.weight == 1).count() as u64;
        if held == rows && table.rows.len() as u64 == rows {
            Ok(())
        } else {
            Err(format!(
                "the double holds {} rows ({held} with weight 1), expected {rows}",
                table.rows.len()
            ))
        }
    }

    fn failure(&self, what: &str) -> String {
        format!("{what}; connector log:\n{}", self.connector.log_tail(30))
    }
}

/// utime + stime of a process in seconds (fields 14 and 15 of /proc/<pid>/stat).
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The command name (field 2) may contain spaces: count fields after its ')'.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // After ')': state is index 0, so utime (field 14) is index 11 and stime index 12.
    (ticks(11) + ticks(12)) as f64 / clock_ticks()
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

fn status_kib(pid: u32, field: &str) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    kib_field(&path, field).ok_or_else(|| format!("no {field} in {path}"))
}

/// A `Name:   1234 kB` line of a /proc file, in KiB.
fn kib_field(path: &str, field: &str) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

fn peak_rss_kib(pid: u32) -> Result<u64, String> {
    status_kib(pid, "VmHWM:")
}

fn current_rss_kib(pid: u32) -> Result<u64, String> {
    status_kib(pid, "VmRSS:")
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn print_run(r: &Run) {
    println!(
        "{:<17} {:<7} delay {:>2} ms: {:>8} rows, written in {:>6.2} s, confirmed after {:>6.2} s \
         = {:>8.0} rows/s; peak RSS {}; {} ingress, {} completion polls; \
         CPU s: connector {:.2}, walsender {:.2}, double {:.2}",
        r.shell.binary_name(),
        r.workload.label(),
        r.delay_ms,
        r.rows,
        r.write.as_secs_f64(),
        r.total.as_secs_f64(),
        r.rows as f64 / r.total.as_secs_f64(),
        mib(r.peak_rss_kib),
        r.ingress_requests,
        r.completion_polls,
        r.cpu_connector,
        r.cpu_walsender,
        r.cpu_double,
    );
}

fn machine() -> Vec<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = kib_field("/proc/meminfo", "MemTotal:");
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    vec![
        format!("CPU: {model}, {cores} cores available to this process"),
        format!("load average at the end (1, 5, 15 min): {}", load_average()),
        format!("memory: {}", mem.map_or("unknown".to_owned(), mib)),
        format!("kernel: Linux {}", kernel.trim()),
    ]
}

/// The first three fields of /proc/loadavg: other work on the machine skews the figures.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// Size of the binary as built, and after `strip` (a temporary copy).
fn sizes(binary: &Path) -> (u64, Option<u64>) {
    let built = std::fs::metadata(binary).map_or(0, |m| m.len());
    let copy = std::env::temp_dir().join(format!(
        "slotline-size-{}-{}",
        std::process::id(),
        binary.file_name().and_then(|n| n.to_str()).unwrap_or("bin")
    ));
    let stripped = std::fs::copy(binary, &copy)
        .ok()
        .filter(|_| {
            std::process::Command::new("strip")
                .arg(&copy)
                .status()
                .is_ok_and(|s| s.success())
        })
        .and_then(|_| std::fs::metadata(&copy).ok())
        .map(|m| m.len());
    let _ = std::fs::remove_file(&copy);
    (built, stripped)
}

fn print_summary(
    pg: &PgCluster,
    binaries: &[(Shell, PathBuf)],
    runs: &[Run],
    idle: &[(Shell, f64, u64)],
    args: &Args,
) -> Result<(), String> {
    println!("\n## summary\n");
    for line in machine() {
        println!("- {line}");
    }
    println!("- {}", pg.psql("postgres", "SELECT version()"));
    println!(
        "- connector settings: product defaults{}",
        if args.extra.is_empty() {
            String::new()
        } else {
            format!(" plus {:?}", args.extra)
        }
    );
    println!("\n| workload | rows | completion delay | shell | written (s) | confirmed (s) | rows/s | peak RSS | ingress requests | CPU s connector / walsender / double |");
    println!("|---|---:|---:|---|---:|---:|---:|---:|---:|---|");
    for r in runs {
        println!(
            "| {} | {} | {} ms | {} | {:.2} | {:.2} | {:.0} | {} | {} | {:.2} / {:.2} / {:.2} |",
            r.workload.label(),
            r.rows,
            r.delay_ms,
            r.shell.binary_name(),
            r.write.as_secs_f64(),
            r.total.as_secs_f64(),
            r.rows as f64 / r.total.as_secs_f64(),
            mib(r.peak_rss_kib),
            r.ingress_requests,
            r.cpu_connector,
            r.cpu_walsender,
            r.cpu_double,
        );
    }
    println!("\n| binary | size as built | stripped |");
    println!("|---|---:|---:|");
    for (_, binary) in binaries {
        let (built, stripped) = sizes(binary);
        println!(
            "| {} | {} | {} |",
            binary.file_name().and_then(|n| n.to_str()).unwrap_or("?"),
            mib(built / 1024),
            stripped.map_or("strip failed".to_owned(), |s| mib(s / 1024))
        );
    }
    if !idle.is_empty() {
        println!(
            "\n| binary | idle CPU over {} s (utime+stime, {:.0} ms ticks) | share of one core | RSS at the end |",
            args.idle_secs,
            1000.0 / clock_ticks()
        );
        println!("|---|---:|---:|---:|");
        for (shell, cpu, rss) in idle {
            println!(
                "| {} | {:.2} s | {:.3} % | {} |",
                shell.binary_name(),
                cpu,
                cpu / args.idle_secs as f64 * 100.0,
                mib(*rss)
            );
        }
    }
    Ok(())
}
