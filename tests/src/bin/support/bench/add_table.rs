//! The add-table suite: a table added to a running deployment is copied while another
//! table streams (issue 30), per connector binary and per copy mode.
//!
//! Every run has a database of its own: `users` (small, in the publication) and `items`
//! (`--rows` rows, not in it), `items` frozen and analyzed. A connector (fresh slot and
//! state directory, `SNAPSHOT_MODE=initial`, TABLES=users) copies `users`, catches up and
//! is stopped gracefully. Then `items` joins the publication (in the `exported` mode after
//! `ALTER TABLE items REPLICA IDENTITY FULL`, which the online copy cannot walk: the
//! connector copies it under a temporary slot's exported snapshot, before the stream, the
//! way every copy used to run), `psql -c "COPY items TO STDOUT" > /dev/null` is timed on
//! the same table, and the connector starts again with TABLES=users,items against the same
//! double, state file and slot.
//!
//! From just before that start a writer commits single-row autocommit statements to
//! `users` at `--rate` (an INSERT of a new id and an UPDATE of an existing one in turn, each
//! key written once), paced by absolute deadlines, until `--after-secs` past the copy's end.
//! A commit's latency is the first time the double stamped its key at or after the instant
//! just before its statement went to psql (`FelderaDouble::apply_times`, one monotonic
//! clock), split into commits sent before the copy ended and after.
//!
//! The copy ends when the state file records the `public.items` route `"phase":
//! "complete"` (polled every 20 ms); the instant the double first held every row of
//! `items` is reported beside it. Its time runs from the connector's second start.
//!
//! Every ~100 ms a third session samples the snapshots slotline's own sessions hold: every
//! backend whose `application_name` starts with `slotline` and whose `backend_xmin` is
//! set (the stream's walsender `slotline/<slot>`, a temporary slot's walsender, the
//! exported copy's workers `slotline/<slot>/copy-N`, the online copier
//! `slotline/<slot>/online-copy`), with `now() - xact_start`, and every replication slot's
//! `xmin` and `catalog_xmin`. A backend's xmin counts as held from the first sample that
//! saw that pid with that xmin: "held" is the longest such stretch during the copy, an
//! estimate (to ~100 ms) of how far back VACUUM's removable cutoff was kept by slotline.
//!
//! At the end the double's `users` and `items` are compared row by row with PostgreSQL's
//! and the differences counted. Nothing here asserts a figure.
//!
//! Owns: the databases `add_<n>`, its connectors, writer and sampler. Never asserts a figure.

use super::{Binary, Common};
use crate::support::{self, ConnectorProcess, Psql};
use serde_json::{json, Value};
use slotline_tests::feldera_double::{DoubleConfig, FelderaDouble};
use slotline_tests::pg::{find_pg_bin, PgCluster};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long one copy may take.
const COPY_TIMEOUT: Duration = Duration::from_secs(1800);
/// How long the first start may take to copy `users` and catch up.
const SEED_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the writer's last commits may take to reach the double.
const TAIL_TIMEOUT: Duration = Duration::from_secs(30);
/// A commit later than this counts against the target (issue 30: within 5 s).
const LATE: Duration = Duration::from_secs(5);
/// The sampler's period.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// How the added table is copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Walked by key in chunks beside the stream.
    Online,
    /// `REPLICA IDENTITY FULL`: a temporary slot's exported snapshot, before the stream.
    Exported,
}

impl Mode {
    pub fn parse(raw: &str) -> Result<Mode, String> {
        match raw {
            "online" => Ok(Mode::Online),
            "exported" => Ok(Mode::Exported),
            other => Err(format!(
                "unknown mode {other:?}: accepted are online and exported"
            )),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Mode::Online => "online",
            Mode::Exported => "exported (REPLICA IDENTITY FULL)",
        }
    }

    /// What the connector's log says when it copies this way.
    fn log_mark(self) -> &'static str {
        match self {
            Mode::Online => "copying public.items online",
            Mode::Exported => "created temporary replication slot",
        }
    }
}

#[derive(Debug)]
pub struct AddTableArgs {
    pub binaries: Vec<Binary>,
    pub modes: Vec<Mode>,
    /// Rows of `items`.
    pub rows: u64,
    /// Rows of `users` before the writer starts.
    pub users_rows: u64,
    /// Writer commits per second.
    pub rate: u32,
    /// Writing past the copy's end.
    pub after: Duration,
    pub json: Option<PathBuf>,
    pub common: Common,
}

/// Latencies of one group of commits.
#[derive(Debug, Default, Clone)]
pub struct Latencies {
    pub commits: u64,
    pub p50: Duration,
    pub p99: Duration,
    pub max: Duration,
    /// Commits that reached the double later than `LATE`.
    pub late: u64,
}

/// What one sampler saw, over the copy.
#[derive(Debug, Default, Clone)]
pub struct Held {
    /// Samples taken during the copy.
    pub samples: u64,
    /// The largest `now() - xact_start` of a slotline session with a `backend_xmin`.
    pub max_xact_age: f64,
    /// The longest a slotline backend held one xmin (first sample to last).
    pub max_held: f64,
    /// Per kind of session (`walsender`, `copy-N`, `online-copy`, ...): the longest it held
    /// one xmin, and its largest `now() - xact_start` (-1 when it has none).
    pub by_session: BTreeMap<String, (f64, f64)>,
    /// Replication slots seen with an `xmin` (data, not catalog): name -> samples.
    pub slot_xmin: BTreeMap<String, u64>,
    /// The largest `age(catalog_xmin)` of a slot, in transactions.
    pub max_catalog_xmin_age: i64,
}

#[derive(Debug)]
pub struct AddTableRun {
    pub binary: String,
    pub mode: Mode,
    pub rows: u64,
    /// Whether the connector's log shows the mode asked for.
    pub mode_seen: bool,
    /// `psql -c "COPY items TO STDOUT" > /dev/null`.
    pub psql_copy: Duration,
    /// Second start -> the state file records items complete.
    pub copy: Duration,
    /// Second start -> the double first held every row of items.
    pub double_full: Option<Duration>,
    pub during: Latencies,
    pub after: Latencies,
    /// Writer commits the double never showed.
    pub lost: u64,
    /// Commits per second the writer achieved.
    pub achieved: f64,
    /// The most a commit was sent after its deadline.
    pub writer_late: Duration,
    pub held: Held,
    pub ingress_requests: u64,
    pub cpu_connector: f64,
    pub peak_rss_kib: u64,
    /// Rows of (users, items) that differ between the double and PostgreSQL.
    pub differing: (u64, u64),
    /// Rows of (users, items) in PostgreSQL at the end.
    pub pg_rows: (u64, u64),
    pub exit_code: Option<i32>,
}

impl AddTableRun {
    fn rows_per_sec(&self) -> f64 {
        self.rows as f64 / self.copy.as_secs_f64()
    }

    fn ratio(&self) -> f64 {
        self.copy.as_secs_f64() / self.psql_copy.as_secs_f64()
    }
}

fn schema() -> Value {
    let field = |name: &str, kind: &str, nullable: bool| {
        json!({"name": name, "case_sensitive": false,
            "columntype": {"type": kind, "nullable": nullable}})
    };
    json!({"inputs": [
        {"name": "users", "case_sensitive": false, "primary_key": ["id"], "materialized": false,
         "properties": {}, "fields": [field("id", "BIGINT", false), field("name", "VARCHAR", true)]},
        {"name": "items", "case_sensitive": false, "primary_key": ["id"], "materialized": false,
         "properties": {}, "fields": [field("id", "BIGINT", false), field("qty", "BIGINT", true),
            field("name", "VARCHAR", true)]}],
        "outputs": []})
}

/// Runs every mode and binary, in that nesting.
pub fn run(pg: &PgCluster, args: &AddTableArgs) -> Result<Vec<AddTableRun>, String> {
    let mut runs = Vec::new();
    for mode in &args.modes {
        for binary in &args.binaries {
            let n = runs.len();
            let run = measure(pg, args, binary, *mode, n)?;
            print_run(&run);
            runs.push(run);
        }
    }
    if let Some(path) = &args.json {
        let body = serde_json::to_string_pretty(&runs_json(args, &runs))
            .map_err(|e| format!("encode the report: {e}"))?;
        std::fs::write(path, body).map_err(|e| format!("write {}: {e}", path.display()))?;
        println!("report written to {}", path.display());
    }
    Ok(runs)
}

/// A connector process of a run, with the suite's extras and wrapper.
fn spawn(
    common: &Common,
    binary: &Path,
    name: &str,
    mut vars: Vec<(String, String)>,
    scratch: &Path,
) -> Result<ConnectorProcess, String> {
    vars.extend(common.extra.iter().cloned());
    let (log, keep) = match &common.log_dir {
        Some(dir) => (dir.join(format!("{name}.log")), true),
        None => (scratch.join(format!("{name}.log")), false),
    };
    match common.wrapper.is_empty() {
        true => ConnectorProcess::spawn(binary, &vars, log, keep),
        false => ConnectorProcess::spawn_under(&common.wrapper, binary, &vars, log, keep),
    }
}

/// Removes a run's state directory however the run ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn set(vars: &mut Vec<(String, String)>, name: &str, value: &str) {
    vars.retain(|(k, _)| k != name);
    vars.push((name.to_owned(), value.to_owned()));
}

/// The state file's record of `public.items`, when its `phase` is `complete`.
fn items_complete(state_file: &Path) -> bool {
    let Ok(bytes) = std::fs::read(state_file) else {
        return false;
    };
    let Ok(state) = serde_json::from_slice::<Value>(&bytes) else {
        return false;
    };
    state["phase"] == "complete"
        && state["routes"].as_array().is_some_and(|routes| {
            routes
                .iter()
                .any(|r| r["source"] == "public.items" && r["phase"] == "complete")
        })
}

fn state_complete(state_file: &Path) -> bool {
    std::fs::read(state_file)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .is_some_and(|s| s["phase"] == "complete")
}

fn measure(
    pg: &PgCluster,
    args: &AddTableArgs,
    binary: &Binary,
    mode: Mode,
    n: usize,
) -> Result<AddTableRun, String> {
    let db = pg.create_database(&format!("add_{n}"));
    let rows = args.rows;
    let users_rows = args.users_rows;
    println!(
        "{} {}: filling users ({users_rows} rows) and items ({rows} rows)",
        binary.label,
        mode.label()
    );
    pg.psql(
        &db,
        &format!(
            "CREATE TABLE users (id bigint PRIMARY KEY, name text);
             CREATE TABLE items (id bigint PRIMARY KEY, qty bigint, name text);
             INSERT INTO users SELECT g, 'user ' || g FROM generate_series(1, {users_rows}) g;
             INSERT INTO items SELECT g, (g * 7) % 1000, 'item number ' || g FROM generate_series(1, {rows}) g;
             CREATE PUBLICATION p FOR TABLE users;"
        ),
    );
    pg.psql(&db, "VACUUM (FREEZE, ANALYZE) items");
    pg.psql(&db, "VACUUM (FREEZE, ANALYZE) users");

    let feldera = FelderaDouble::start(DoubleConfig::new("demo", schema()).with_apply_times(true))
        .map_err(|e| format!("start the double: {e}"))?;
    let slot = format!("add_{n}");
    let scratch = Scratch(super::state_dir(&slot)?);
    let state_file = scratch.0.join(format!("{slot}.state.json"));
    let mut vars =
        support::connector_vars(&pg.url(&db), &feldera.base_url(), "p", "users", &scratch.0);
    set(&mut vars, "PG_SLOT", &slot);
    set(&mut vars, "SNAPSHOT_MODE", "initial");
    let mut psql = Psql::connect(pg.port(), &db)?;

    // 1. users alone: copied, caught up, stopped gracefully.
    let mut first = spawn(
        &args.common,
        &binary.path,
        &format!("{slot}-seed"),
        vars.clone(),
        &scratch.0,
    )?;
    let target = psql.value("SELECT pg_current_wal_lsn()")?;
    super::poll_until(
        SEED_TIMEOUT,
        Duration::from_millis(20),
        "users copied and caught up",
        || {
            if let Some(code) = first.exit_code() {
                return Err(format!(
                    "the first connector exited with {code}:\n{}",
                    first.log_tail(30)
                ));
            }
            Ok(state_complete(&state_file) && psql.confirmed_at_least(&slot, &target)?)
        },
    )?;
    let code = first.terminate(Duration::from_secs(30));
    if code != Some(0) {
        return Err(format!(
            "the first connector stopped with {code:?}:\n{}",
            first.log_tail(30)
        ));
    }
    drop(first);

    // 2. items joins; the plain COPY on the same table, with nothing else running.
    if mode == Mode::Exported {
        psql.query("ALTER TABLE items REPLICA IDENTITY FULL")?;
    }
    psql.query("ALTER PUBLICATION p ADD TABLE items")?;
    let psql_copy = plain_copy(pg, &db)?;

    // 3. The second start, the writer and the sampler.
    set(&mut vars, "TABLES", "users,items");
    let stop_writer = Arc::new(AtomicBool::new(false));
    let stop_sampler = Arc::new(AtomicBool::new(false));
    let sampler = Sampler::start(pg.port(), &db, stop_sampler.clone())?;
    let writer = Writer::start(pg.port(), &db, args.rate, users_rows, stop_writer.clone())?;
    let started = Instant::now();
    let mut connector = spawn(&args.common, &binary.path, &slot, vars, &scratch.0)?;
    let pid = connector.pid();
    let mut double_full = None;
    let done = super::poll_until(
        COPY_TIMEOUT,
        Duration::from_millis(20),
        "the copy of items",
        || {
            if let Some(code) = connector.exit_code() {
                return Err(format!("the connector exited with {code}"));
            }
            if double_full.is_none() && feldera.row_count("items").unwrap_or(0) as u64 >= rows {
                double_full = Some(started.elapsed());
            }
            Ok(items_complete(&state_file))
        },
    );
    let copy = started.elapsed();
    let copy_end = Instant::now();
    if let Err(e) = done {
        stop_writer.store(true, Ordering::Relaxed);
        stop_sampler.store(true, Ordering::Relaxed);
        let _ = writer.join();
        let _ = sampler.join();
        return Err(format!("{e}; connector log:\n{}", connector.log_tail(30)));
    }
    if double_full.is_none() && feldera.row_count("items").unwrap_or(0) as u64 >= rows {
        double_full = Some(started.elapsed());
    }
    std::thread::sleep(args.after);
    stop_writer.store(true, Ordering::Relaxed);
    stop_sampler.store(true, Ordering::Relaxed);
    let written = writer.join()?;
    let samples = sampler.join()?;

    // 4. The tail, then the figures and the check.
    let users_expected = psql.value("SELECT count(*) FROM users")?;
    let users_expected: usize = users_expected.parse().map_err(|e| format!("count: {e}"))?;
    let _ = super::poll_until(
        TAIL_TIMEOUT,
        Duration::from_millis(20),
        "the writer's tail",
        || {
            Ok(feldera.row_count("users").unwrap_or(0) >= users_expected
                && all_applied(&feldera, &written.sent)?)
        },
    );
    let mode_seen = std::fs::read_to_string(match &args.common.log_dir {
        Some(dir) => dir.join(format!("{slot}.log")),
        None => scratch.0.join(format!("{slot}.log")),
    })
    .is_ok_and(|log| log.contains(mode.log_mark()));
    let cpu_connector = super::cpu_seconds(pid);
    let peak_rss_kib = super::peak_rss_kib(pid).unwrap_or(0);
    let exit_code = connector.terminate(Duration::from_secs(30));
    if exit_code != Some(0) {
        println!(
            "the connector stopped with {exit_code:?}:\n{}",
            connector.log_tail(30)
        );
    }
    drop(connector);
    drop_slot(&mut psql, &slot)?;

    let stamps = stamps_by_key(&feldera)?;
    let mut during = Vec::new();
    let mut after = Vec::new();
    let mut lost = 0;
    for (key, sent) in &written.sent {
        let applied = stamps
            .get(key)
            .and_then(|list| list.iter().find(|at| **at >= *sent).copied());
        match applied {
            Some(at) if *sent < copy_end => during.push(at - *sent),
            Some(at) => after.push(at - *sent),
            None => lost += 1,
        }
    }
    let differing = (
        differing_rows(&feldera, &mut psql, "users", "SELECT id, name FROM users")?,
        differing_rows(
            &feldera,
            &mut psql,
            "items",
            "SELECT id, qty, name FROM items",
        )?,
    );
    let pg_rows = (
        psql.value("SELECT count(*) FROM users")?
            .parse()
            .unwrap_or(0),
        psql.value("SELECT count(*) FROM items")?
            .parse()
            .unwrap_or(0),
    );
    drop(psql);
    pg.psql("postgres", &format!("DROP DATABASE \"{db}\""));
    Ok(AddTableRun {
        binary: binary.label.clone(),
        mode,
        rows,
        mode_seen,
        psql_copy,
        copy,
        double_full,
        during: latencies(during),
        after: latencies(after),
        lost,
        achieved: written.sent.len() as f64 / written.elapsed.as_secs_f64(),
        writer_late: written.late,
        held: samples.over(started, copy_end),
        ingress_requests: feldera
            .request_counts()
            .get("ingress")
            .copied()
            .unwrap_or(0),
        cpu_connector,
        peak_rss_kib,
        differing,
        pg_rows,
        exit_code,
    })
}

/// `psql -c "COPY items TO STDOUT" > /dev/null`: its wall-clock time.
fn plain_copy(pg: &PgCluster, db: &str) -> Result<Duration, String> {
    let mut command = Command::new(find_pg_bin()?.join("psql"));
    command
        .args(["-X", "-q", "-h", "127.0.0.1", "-p", &pg.port().to_string()])
        .args(["-U", "postgres", "-d", db])
        .args(["-c", "COPY items TO STDOUT"]);
    super::time_command("psql COPY", &mut command)
}

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

/// Every stamp of `users` by id, in the order applied.
fn stamps_by_key(feldera: &FelderaDouble) -> Result<HashMap<i64, Vec<Instant>>, String> {
    let stamps = feldera
        .apply_times("users")
        .ok_or("no table users in the double")?;
    let mut by_key: HashMap<i64, Vec<Instant>> = HashMap::new();
    for (key, at) in stamps {
        let id = key[0]
            .as_i64()
            .ok_or_else(|| format!("a key of users that is not a bigint: {key}"))?;
        by_key.entry(id).or_default().push(at);
    }
    Ok(by_key)
}

/// Whether every commit sent has a stamp at or after its sending.
fn all_applied(feldera: &FelderaDouble, sent: &[(i64, Instant)]) -> Result<bool, String> {
    let stamps = stamps_by_key(feldera)?;
    Ok(sent.iter().all(|(key, at)| {
        stamps
            .get(key)
            .is_some_and(|list| list.iter().any(|s| s >= at))
    }))
}

/// Rows that differ between the double's `table` and PostgreSQL's answer to `sql` (its
/// columns in the double's order, the first the bigint key): missing, extra or unequal.
fn differing_rows(
    feldera: &FelderaDouble,
    psql: &mut Psql,
    table: &str,
    sql: &str,
) -> Result<u64, String> {
    let mut expected: HashMap<i64, Vec<String>> = HashMap::new();
    for line in psql.query(&format!("COPY ({sql}) TO STDOUT"))? {
        let mut fields = line.split('\t').map(str::to_owned);
        let id = fields
            .next()
            .and_then(|f| f.parse::<i64>().ok())
            .ok_or_else(|| format!("a row of {table} without a bigint key: {line}"))?;
        expected.insert(id, fields.collect());
    }
    let held = feldera
        .table(table)
        .ok_or_else(|| format!("no table {table} in the double"))?;
    let columns: Vec<&str> = match table {
        "users" => vec!["name"],
        _ => vec!["qty", "name"],
    };
    let mut differing = 0;
    for row in &held.rows {
        let id = row.row["id"].as_i64();
        let values: Vec<String> = columns
            .iter()
            .map(|c| match &row.row[*c] {
                Value::Null => "\\N".to_owned(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        match id.and_then(|id| expected.remove(&id)) {
            Some(want) if want == values && row.weight == 1 => {}
            _ => differing += 1,
        }
    }
    Ok(differing + expected.len() as u64)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn latencies(mut values: Vec<Duration>) -> Latencies {
    values.sort_unstable();
    Latencies {
        commits: values.len() as u64,
        p50: percentile(&values, 0.50),
        p99: percentile(&values, 0.99),
        max: values.last().copied().unwrap_or_default(),
        late: values.iter().filter(|d| **d > LATE).count() as u64,
    }
}

/// What the writer did.
#[derive(Debug)]
struct Written {
    /// (id written, the instant just before its statement went to psql).
    sent: Vec<(i64, Instant)>,
    elapsed: Duration,
    late: Duration,
}

/// The `users` writer: a thread committing one statement per deadline until told to stop.
struct Writer(JoinHandle<Result<Written, String>>);

impl Writer {
    fn start(
        port: u16,
        db: &str,
        rate: u32,
        users_rows: u64,
        stop: Arc<AtomicBool>,
    ) -> Result<Writer, String> {
        let mut psql = Psql::connect(port, db)?;
        let users_rows = users_rows as i64;
        Ok(Writer(std::thread::spawn(move || {
            let start = Instant::now();
            let mut sent = Vec::new();
            let mut late = Duration::ZERO;
            let mut next_insert = users_rows + 1;
            let mut next_update = 1;
            for k in 0u64.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let due = start + Duration::from_secs_f64(k as f64 / f64::from(rate.max(1)));
                let now = Instant::now();
                match due.checked_duration_since(now) {
                    Some(wait) => std::thread::sleep(wait),
                    None => late = late.max(now - due),
                }
                // Each key is written once: a commit is matched to its key's first stamp
                // after it was sent.
                let (id, sql) = match k % 2 == 1 && next_update <= users_rows {
                    true => {
                        next_update += 1;
                        let id = next_update - 1;
                        (
                            id,
                            format!("UPDATE users SET name = 'updated {k}' WHERE id = {id}"),
                        )
                    }
                    false => {
                        next_insert += 1;
                        let id = next_insert - 1;
                        (
                            id,
                            format!("INSERT INTO users VALUES ({id}, 'inserted {k}')"),
                        )
                    }
                };
                let before = Instant::now();
                psql.query(&sql)?;
                sent.push((id, before));
            }
            Ok(Written {
                sent,
                elapsed: start.elapsed(),
                late,
            })
        })))
    }

    fn join(self) -> Result<Written, String> {
        self.0
            .join()
            .map_err(|_| "the writer panicked".to_owned())?
    }
}

/// One backend seen holding an xmin.
#[derive(Debug, Clone)]
struct Holding {
    at: Instant,
    /// The session's kind: its application name without the slot.
    session: String,
    pid: String,
    xmin: String,
    /// `now() - xact_start` in seconds, -1 when it has no transaction start.
    xact_age: f64,
}

/// One sample of the slots.
#[derive(Debug, Clone)]
struct SlotSample {
    at: Instant,
    name: String,
    has_xmin: bool,
    catalog_xmin_age: i64,
}

#[derive(Debug, Default)]
struct Samples {
    /// The instants samples were taken.
    taken: Vec<Instant>,
    holdings: Vec<Holding>,
    slots: Vec<SlotSample>,
}

impl Samples {
    /// The figures of the samples taken from `from` to `to`.
    fn over(&self, from: Instant, to: Instant) -> Held {
        let within = |at: &Instant| *at >= from && *at <= to;
        let mut held = Held {
            samples: self.taken.iter().filter(|at| within(at)).count() as u64,
            ..Held::default()
        };
        // (pid, xmin) -> first seen; every sample of it since extends the stretch.
        let mut first: HashMap<(String, String), Instant> = HashMap::new();
        for h in self.holdings.iter().filter(|h| within(&h.at)) {
            let since = *first.entry((h.pid.clone(), h.xmin.clone())).or_insert(h.at);
            let stretch = (h.at - since).as_secs_f64();
            held.max_held = held.max_held.max(stretch);
            held.max_xact_age = held.max_xact_age.max(h.xact_age);
            let entry = held
                .by_session
                .entry(h.session.clone())
                .or_insert((0.0, -1.0));
            entry.0 = entry.0.max(stretch);
            entry.1 = entry.1.max(h.xact_age);
        }
        for s in self.slots.iter().filter(|s| within(&s.at)) {
            if s.has_xmin {
                *held.slot_xmin.entry(s.name.clone()).or_insert(0) += 1;
            }
            held.max_catalog_xmin_age = held.max_catalog_xmin_age.max(s.catalog_xmin_age);
        }
        held
    }
}

/// The snapshot sampler: a thread asking every `SAMPLE_EVERY` until told to stop.
struct Sampler(JoinHandle<Result<Samples, String>>);

impl Sampler {
    fn start(port: u16, db: &str, stop: Arc<AtomicBool>) -> Result<Sampler, String> {
        let mut psql = Psql::connect(port, db)?;
        Ok(Sampler(std::thread::spawn(move || {
            let mut samples = Samples::default();
            let start = Instant::now();
            for k in 1u32.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let at = Instant::now();
                let lines = psql.query(
                    "SELECT pid, application_name, backend_type, backend_xmin, \
                     coalesce(extract(epoch FROM now() - xact_start), -1) FROM pg_stat_activity \
                     WHERE application_name LIKE 'slotline%' AND backend_xmin IS NOT NULL",
                )?;
                for line in lines {
                    let f: Vec<&str> = line.split('|').collect();
                    if f.len() < 5 {
                        continue;
                    }
                    samples.holdings.push(Holding {
                        at,
                        session: session_kind(f[1], f[2]),
                        pid: f[0].to_owned(),
                        xmin: f[3].to_owned(),
                        xact_age: f[4].parse().unwrap_or(-1.0),
                    });
                }
                let lines = psql.query(
                    "SELECT slot_name, xmin IS NOT NULL, coalesce(age(catalog_xmin), 0) \
                     FROM pg_replication_slots",
                )?;
                for line in lines {
                    let f: Vec<&str> = line.split('|').collect();
                    if f.len() < 3 {
                        continue;
                    }
                    samples.slots.push(SlotSample {
                        at,
                        name: f[0].to_owned(),
                        has_xmin: f[1] == "t",
                        catalog_xmin_age: f[2].parse().unwrap_or(0),
                    });
                }
                samples.taken.push(at);
                let due = start + SAMPLE_EVERY * k;
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
            }
            Ok(samples)
        })))
    }

    fn join(self) -> Result<Samples, String> {
        self.0
            .join()
            .map_err(|_| "the sampler panicked".to_owned())?
    }
}

/// `slotline/<slot>/copy-0` -> `copy-0`; `slotline/<slot>` -> `<backend type>` (the
/// walsender of the stream or of a temporary slot).
fn session_kind(application_name: &str, backend_type: &str) -> String {
    let parts: Vec<&str> = application_name.splitn(3, '/').collect();
    match parts.as_slice() {
        [_, _, kind] => (*kind).to_owned(),
        _ => format!("{backend_type} ({application_name})"),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn sessions(held: &Held) -> String {
    if held.by_session.is_empty() {
        return "none".to_owned();
    }
    held.by_session
        .iter()
        .map(|(name, (stretch, age))| match *age < 0.0 {
            true => format!("{name} {stretch:.1} s (no xact_start)"),
            false => format!("{name} {stretch:.1} s (xact {age:.1} s)"),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn print_run(r: &AddTableRun) {
    println!(
        "{:<22} {:<33}: psql COPY {:.2} s, copy {:.2} s (double full at {}), ratio {:.2}, {:.0} rows/s; \
         users during the copy: {} commits, p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms, {} over 5 s; \
         after: {} commits, p50 {:.0} ms, max {:.0} ms; lost {}; writer {:.1}/s (late by up to {:.0} ms); \
         snapshot held up to {:.1} s (xact age {:.1} s; {}); slot xmin {:?}, catalog_xmin age up to {}; \
         {} samples; differing rows users {} items {}; mode in the log: {}; exit {:?}; \
         {} ingress; CPU s connector {:.2}; peak RSS {}; load {}",
        r.binary,
        r.mode.label(),
        secs(r.psql_copy),
        secs(r.copy),
        r.double_full
            .map_or("never".to_owned(), |d| format!("{:.2} s", secs(d))),
        r.ratio(),
        r.rows_per_sec(),
        r.during.commits,
        ms(r.during.p50),
        ms(r.during.p99),
        ms(r.during.max),
        r.during.late,
        r.after.commits,
        ms(r.after.p50),
        ms(r.after.max),
        r.lost,
        r.achieved,
        ms(r.writer_late),
        r.held.max_held,
        r.held.max_xact_age,
        sessions(&r.held),
        r.held.slot_xmin,
        r.held.max_catalog_xmin_age,
        r.held.samples,
        r.differing.0,
        r.differing.1,
        r.mode_seen,
        r.exit_code,
        r.ingress_requests,
        r.cpu_connector,
        super::mib(r.peak_rss_kib),
        super::load_average(),
    );
}

/// The scenario's settings.
pub fn print_settings(args: &AddTableArgs) {
    println!(
        "- add-table: users {} rows (in the publication), items {} rows (id bigint, qty bigint, \
         name text; frozen) added; writer: one psql session, single-row autocommit INSERT/UPDATE \
         of users in turn at {}/s from just before the second start to {} s past the copy's end; \
         latency = first stamp of the key in the double - just before the statement was sent; \
         copy = second start -> the state file records public.items complete; snapshots sampled \
         every {} ms; COPY_CHUNK_ROWS={}, SNAPSHOT_WORKERS={}, BATCH_LINGER_MS={}, \
         MAX_IN_FLIGHT_BATCHES={}",
        args.users_rows,
        args.rows,
        args.rate,
        args.after.as_secs(),
        SAMPLE_EVERY.as_millis(),
        super::setting(&args.common, "COPY_CHUNK_ROWS"),
        super::setting(&args.common, "SNAPSHOT_WORKERS"),
        super::setting(&args.common, "BATCH_LINGER_MS"),
        super::setting(&args.common, "MAX_IN_FLIGHT_BATCHES"),
    );
}

/// The summary tables (Markdown).
pub fn print_summary(runs: &[AddTableRun]) {
    println!(
        "\n| mode | binary | rows | psql COPY (s) | copy (s) | double full (s) | ratio | rows/s | \
         users during copy: commits | p50 (ms) | p99 (ms) | max (ms) | > 5 s | users after: p50 (ms) | max (ms) | lost | snapshot held max (s) | xact age max (s) | rows differing (users, items) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for r in runs {
        println!(
            "| {} | {} | {} | {:.2} | {:.2} | {} | **{:.2}** | {:.0} | {} | {:.0} | {:.0} | **{:.0}** | {} | {:.0} | {:.0} | {} | **{:.1}** | {:.1} | {}, {} |",
            r.mode.label(),
            r.binary,
            r.rows,
            secs(r.psql_copy),
            secs(r.copy),
            r.double_full
                .map_or("never".to_owned(), |d| format!("{:.2}", secs(d))),
            r.ratio(),
            r.rows_per_sec(),
            r.during.commits,
            ms(r.during.p50),
            ms(r.during.p99),
            ms(r.during.max),
            r.during.late,
            ms(r.after.p50),
            ms(r.after.max),
            r.lost,
            r.held.max_held,
            r.held.max_xact_age,
            r.differing.0,
            r.differing.1,
        );
    }
    println!("\n| mode | binary | sessions seen holding an xmin during the copy: longest one xmin (largest xact age) | slots with a data xmin (samples) | catalog_xmin age max (xids) | samples | connector CPU s | peak RSS | ingress requests | mode in the log | exit |");
    println!("|---|---|---|---|---:|---:|---:|---:|---:|---|---|");
    for r in runs {
        let slots: BTreeSet<String> = r
            .held
            .slot_xmin
            .iter()
            .map(|(name, n)| format!("{name} ({n})"))
            .collect();
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.2} | {} | {} | {} | {:?} |",
            r.mode.label(),
            r.binary,
            sessions(&r.held),
            match slots.is_empty() {
                true => "none".to_owned(),
                false => slots.into_iter().collect::<Vec<_>>().join(", "),
            },
            r.held.max_catalog_xmin_age,
            r.held.samples,
            r.cpu_connector,
            super::mib(r.peak_rss_kib),
            r.ingress_requests,
            r.mode_seen,
            r.exit_code,
        );
    }
}

fn latencies_json(l: &Latencies) -> Value {
    json!({"commits": l.commits, "p50_ms": ms(l.p50), "p99_ms": ms(l.p99), "max_ms": ms(l.max),
        "over_5s": l.late})
}

fn runs_json(args: &AddTableArgs, runs: &[AddTableRun]) -> Value {
    let runs: Vec<Value> = runs
        .iter()
        .map(|r| {
            json!({
                "binary": r.binary,
                "mode": match r.mode { Mode::Online => "online", Mode::Exported => "exported" },
                "mode_seen_in_log": r.mode_seen,
                "rows": r.rows,
                "psql_copy_s": secs(r.psql_copy),
                "copy_s": secs(r.copy),
                "double_full_s": r.double_full.map(secs),
                "ratio": r.ratio(),
                "rows_per_s": r.rows_per_sec(),
                "users_during_copy": latencies_json(&r.during),
                "users_after_copy": latencies_json(&r.after),
                "lost": r.lost,
                "writer_commits_per_s": r.achieved,
                "writer_late_ms": ms(r.writer_late),
                "snapshot_held_max_s": r.held.max_held,
                "xact_age_max_s": r.held.max_xact_age,
                "sessions": r.held.by_session.iter().map(|(k, (held, age))| (k.clone(), json!({"held_s": held, "xact_age_s": age}))).collect::<serde_json::Map<_, _>>(),
                "slots_with_data_xmin": r.held.slot_xmin,
                "catalog_xmin_age_max": r.held.max_catalog_xmin_age,
                "samples": r.held.samples,
                "ingress_requests": r.ingress_requests,
                "cpu_connector_s": r.cpu_connector,
                "peak_rss_kib": r.peak_rss_kib,
                "differing_rows": {"users": r.differing.0, "items": r.differing.1},
                "pg_rows": {"users": r.pg_rows.0, "items": r.pg_rows.1},
                "exit_code": r.exit_code,
            })
        })
        .collect();
    json!({"suite": "add-table", "rows": args.rows, "users_rows": args.users_rows,
        "rate": args.rate, "after_s": args.after.as_secs(), "runs": runs})
}
