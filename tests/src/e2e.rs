//! End-to-end environments: a real PostgreSQL database, the Feldera double, and the real
//! `slotline` / `slotline-blocking` binaries as child processes.
//!
//! One cluster serves a whole test binary (its watchdog stops it when the process ends);
//! every environment gets its own database, publication, slot and double, so tests run in
//! parallel without seeing each other. Child processes are killed on drop.

use crate::feldera_double::{DoubleConfig, FelderaDouble};
use crate::pg::{wait_for, ClusterOptions, PgCluster};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Which shell runs the connector. Every end-to-end test runs against both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shell {
    Tokio,
    Blocking,
}

impl Shell {
    pub const BOTH: [Shell; 2] = [Shell::Tokio, Shell::Blocking];

    pub fn binary_name(self) -> &'static str {
        match self {
            Shell::Tokio => "slotline",
            Shell::Blocking => "slotline-blocking",
        }
    }

    /// The binary in this build's target directory, built on demand when missing.
    pub fn binary(self) -> PathBuf {
        let dir = std::env::current_exe()
            .ok()
            .and_then(|exe| {
                exe.parent()
                    .and_then(|deps| deps.parent())
                    .map(PathBuf::from)
            })
            .expect("test executable lives in target/<profile>/deps");
        let path = dir.join(self.binary_name());
        static BUILT: OnceLock<()> = OnceLock::new();
        BUILT.get_or_init(|| {
            // target/debug holds the dev profile's output, target/<name> the others'.
            let profile = match dir.file_name().and_then(|n| n.to_str()) {
                Some("debug") | None => "dev",
                Some(other) => other,
            };
            let status = connector_build(env!("CARGO").as_ref(), profile)
                .arg("--quiet")
                .status()
                .expect("run cargo build for the shells");
            assert!(status.success(), "building the slotline binaries failed");
        });
        assert!(path.is_file(), "{} was not built", path.display());
        path
    }
}

/// The packages and targets of the nested build of the connector binaries: the shells'
/// two binaries, with the features unified over the shells *and* `slotline-tests`. That is
/// exactly the feature set `cargo run -p slotline-tests --bin demo` (or `--bin e2e-bench`)
/// already compiled every library with, since `slotline-tests` depends on both shells, so
/// the nested build only compiles and links the two `main.rs`. Built for the shells alone,
/// each crate shared with `slotline-tests` (tokio, serde, rustls, the core, ...) would get
/// another feature set and compile a second time.
pub const CONNECTOR_BUILD: &[&str] = &[
    "-p",
    "slotline",
    "-p",
    "slotline-blocking",
    "-p",
    "slotline-tests",
    "--bin",
    "slotline",
    "--bin",
    "slotline-blocking",
];

/// `cargo build` of the connector binaries (`CONNECTOR_BUILD`) in `profile`, for the
/// workspace this crate belongs to, without the variables cargo set for the running
/// program.
pub fn connector_build(cargo: &std::ffi::OsStr, profile: &str) -> Command {
    let mut build = Command::new(cargo);
    // Variables cargo sets for a test binary or `cargo run` would change build scripts'
    // fingerprints (ring watches CARGO_MANIFEST_DIR) and rebuild half the tree.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if is_per_crate_cargo_variable(&name) {
            build.env_remove(&name);
        }
    }
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    build
        .args(["build", "--profile", profile])
        .args(CONNECTOR_BUILD)
        .arg("--manifest-path")
        .arg(manifest);
    build
}

/// Variables cargo sets per crate for a running test or build script; a nested `cargo
/// build` must not inherit them.
pub fn is_per_crate_cargo_variable(name: &str) -> bool {
    name == "CARGO_MANIFEST_DIR"
        || name == "CARGO_MANIFEST_PATH"
        || name == "CARGO_CRATE_NAME"
        || name == "CARGO_PRIMARY_PACKAGE"
        || name == "CARGO_TARGET_TMPDIR"
        || name.starts_with("CARGO_PKG_")
        || name.starts_with("CARGO_BIN_EXE_")
}

/// The cluster shared by one test binary, with short server settings so tests that need
/// timeouts stay fast.
pub fn shared_cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        PgCluster::start_with(
            ClusterOptions::default()
                .setting("max_replication_slots", "40")
                .setting("max_wal_senders", "40")
                .setting("checkpoint_timeout", "30s"),
        )
    })
}

static ENV_COUNTER: AtomicU32 = AtomicU32::new(0);

/// One database + publication + Feldera double.
pub struct Env {
    pub pg: &'static PgCluster,
    pub db: String,
    pub feldera: FelderaDouble,
    pub name: String,
    pub state_dir: PathBuf,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env")
            .field("db", &self.db)
            .field("feldera", &self.feldera.base_url())
            .finish()
    }
}

impl Env {
    /// Creates database `<prefix>_<n>`, runs `setup_sql` in it (tables, publication `pub`),
    /// and starts a double for pipeline `p` with `schema` (`{"inputs":[..],"outputs":[..]}`).
    pub fn new(prefix: &str, setup_sql: &str, schema: Value) -> Env {
        Self::with_double(prefix, setup_sql, DoubleConfig::new("p", schema))
    }

    pub fn with_double(prefix: &str, setup_sql: &str, double: DoubleConfig) -> Env {
        let pg = shared_cluster();
        let name = format!(
            "{prefix}_{}_{}",
            std::process::id(),
            ENV_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let db = pg.create_database(&name);
        pg.psql(&db, setup_sql);
        let feldera = FelderaDouble::start(double).expect("start the Feldera double");
        let state_dir = std::env::temp_dir().join(format!("slotline-state-{name}"));
        Env {
            pg,
            db,
            feldera,
            name,
            state_dir,
        }
    }

    pub fn sql(&self, sql: &str) -> String {
        self.pg.psql(&self.db, sql)
    }

    /// The base configuration for this environment (`SNAPSHOT_MODE=never`, a 20 ms linger, a
    /// 5 s shutdown confirmation);
    /// `extra` overrides or adds variables.
    pub fn config(&self, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut pairs: Vec<(String, String)> = [
            ("PG_URL", self.pg.url(&self.db)),
            ("PG_PUBLICATION", "pub".to_owned()),
            ("PG_SLOT", format!("s_{}", self.name)),
            ("FELDERA_URL", self.feldera.base_url()),
            ("FELDERA_PIPELINE", "p".to_owned()),
            ("SNAPSHOT_MODE", "never".to_owned()),
            ("STATE_DIR", self.state_dir.display().to_string()),
            ("BATCH_LINGER_MS", "20".to_owned()),
            ("SHUTDOWN_CONFIRM_MS", "5000".to_owned()),
            ("RUST_LOG", "info".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        for (k, v) in extra {
            pairs.retain(|(key, _)| key != k);
            pairs.push(((*k).to_owned(), (*v).to_owned()));
        }
        pairs
    }

    /// Starts the connector with this environment's configuration plus `extra`.
    pub fn start(&self, shell: Shell, extra: &[(&str, &str)]) -> Connector {
        Connector::spawn(shell, &self.config(extra), &self.name)
    }

    pub fn slot_name(&self) -> String {
        format!("s_{}", self.name)
    }

    /// The slot's `confirmed_flush_lsn` as text, or `None` when the slot does not exist.
    pub fn slot_confirmed(&self) -> Option<String> {
        let out = self.sql(&format!(
            "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '{}'",
            self.slot_name()
        ));
        (!out.is_empty()).then_some(out)
    }

    /// Bytes of WAL the slot holds back: current WAL position minus the confirmed flush.
    pub fn retained_wal_bytes(&self) -> Option<i64> {
        let out = self.sql(&format!(
            "SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '{}'",
            self.slot_name()
        ));
        out.parse().ok()
    }

    pub fn slot_exists(&self) -> bool {
        self.slot_confirmed().is_some()
    }

    /// Waits until the slot shows it confirmed the current WAL position of every commit so
    /// far (the connector caught up and acknowledged).
    pub fn wait_caught_up(&self, timeout: Duration) -> bool {
        let target = self.sql("SELECT pg_current_wal_lsn()");
        wait_for(timeout, || {
            let behind = self.sql(&format!(
                "SELECT confirmed_flush_lsn >= '{target}'::pg_lsn FROM pg_replication_slots WHERE slot_name = '{}'",
                self.slot_name()
            ));
            (behind == "t").then_some(())
        })
        .is_some()
    }

    /// PostgreSQL's rows as JSON objects (`row_to_json`), ordered by `order_by`.
    pub fn pg_rows(&self, table: &str, order_by: &str) -> Vec<Value> {
        let out = self.sql(&format!(
            "SELECT coalesce(json_agg(row_to_json(t) ORDER BY {order_by}), '[]') FROM {table} t"
        ));
        match serde_json::from_str(&out) {
            Ok(Value::Array(rows)) => rows,
            other => panic!("unexpected rows from {table}: {other:?}"),
        }
    }

    /// The double's rows of `table` (each with weight 1 asserted), sorted by `key`.
    pub fn feldera_rows(&self, table: &str, key: &str) -> Vec<Value> {
        let snapshot = self
            .feldera
            .table(table)
            .unwrap_or_else(|| panic!("no table {table} in the double"));
        assert!(
            snapshot.faults.is_empty(),
            "double recorded faults for {table}: {:?}",
            snapshot.faults
        );
        let mut rows: Vec<Value> = snapshot
            .rows
            .iter()
            .map(|r| {
                assert_eq!(r.weight, 1, "row {} has weight {}", r.row, r.weight);
                r.row.clone()
            })
            .collect();
        rows.sort_by(|a, b| a[key].to_string().cmp(&b[key].to_string()));
        rows
    }
}

impl Env {
    /// Terminates the walsender streaming this environment's slot (the connector's session
    /// ends as if the connection broke); false when none streams.
    pub fn kill_walsender(&self) -> bool {
        let slot = self.slot_name();
        self.pg.psql("postgres", &format!(
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '{slot}' AND active_pid IS NOT NULL"
        )) == "t"
    }
}

/// Runs each named `fn(Shell)` as two tests, `tokio_shell::name` and `blocking_shell::name`.
#[macro_export]
macro_rules! both_shells {
    ($($name:ident),* $(,)?) => {
        mod tokio_shell {
            $(#[test] fn $name() { super::$name($crate::e2e::Shell::Tokio) })*
        }
        mod blocking_shell {
            $(#[test] fn $name() { super::$name($crate::e2e::Shell::Blocking) })*
        }
    };
}

impl Drop for Env {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.state_dir);
        // Drop the slot and the database so the shared cluster does not fill up.
        let slot = self.slot_name();
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.kill_walsender();
            self.pg.psql("postgres", &format!(
                "SELECT pg_drop_replication_slot('{slot}') FROM pg_replication_slots WHERE slot_name = '{slot}' AND NOT active"
            ));
            self.pg.psql(
                "postgres",
                &format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.db),
            );
        }));
    }
}

/// A running connector process. Killed on drop if still running.
pub struct Connector {
    child: Option<Child>,
    pub log: PathBuf,
    status: Option<ExitStatus>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector").field("log", &self.log).finish()
    }
}

static RUN_COUNTER: AtomicU32 = AtomicU32::new(0);

impl Connector {
    pub fn spawn(shell: Shell, pairs: &[(String, String)], label: &str) -> Connector {
        // The test process's pid too: test binaries of several PostgreSQL versions run side
        // by side (.ci/pg-versions) and may use the same labels.
        let log = std::env::temp_dir().join(format!(
            "slotline-{label}-{}-{}-{}.log",
            shell.binary_name(),
            std::process::id(),
            RUN_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let file = std::fs::File::create(&log).expect("create the connector log");
        let mut command = Command::new(shell.binary());
        command.env_clear();
        command.env("PATH", std::env::var_os("PATH").unwrap_or_default());
        for (k, v) in pairs {
            command.env(k, v);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("clone log handle"))
            .stderr(file)
            .spawn()
            .expect("spawn the connector");
        Connector {
            child: Some(child),
            log,
            status: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits up to `timeout` for the process to exit; its exit code (signals as 128+n).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        if let Some(status) = self.status {
            return Some(code_of(status));
        }
        let child = self.child.as_mut()?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                self.status = Some(status);
                return Some(code_of(status));
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn is_running(&mut self) -> bool {
        self.wait_exit(Duration::ZERO).is_none()
    }

    pub fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .args([&format!("-{signal}"), &self.pid().to_string()])
            .status();
    }

    /// SIGTERM, then waits for the exit code.
    pub fn stop(&mut self, timeout: Duration) -> Option<i32> {
        self.signal("TERM");
        self.wait_exit(timeout)
    }

    /// SIGKILL: no cleanup, no final status update.
    pub fn kill(&mut self) {
        self.signal("KILL");
        let _ = self.wait_exit(Duration::from_secs(10));
    }
}

fn code_of(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

impl Drop for Connector {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if self.status.is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if std::thread::panicking() {
            let text = self.log_text();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!("--- last lines of {} ---", self.log.display());
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

// Helpers for the crash, fault and refusal tests (positions, logs, the row oracle).
impl Env {
    /// The server's current WAL insert position (`pg_current_wal_lsn()`), as text.
    pub fn wal_lsn(&self) -> String {
        self.sql("SELECT pg_current_wal_lsn()")
    }

    /// Creates this environment's slot (logical, pgoutput) before any connector runs, so
    /// that changes written afterwards wait in the slot; returns its confirmed position.
    pub fn create_slot(&self) -> String {
        self.sql(&format!(
            "SELECT lsn FROM pg_create_logical_replication_slot('{}', 'pgoutput')",
            self.slot_name()
        ))
    }

    /// Whether the slot exists and its `confirmed_flush_lsn` is at or before `lsn`: the
    /// connector acknowledged nothing written after `lsn`.
    pub fn slot_at_or_before(&self, lsn: &str) -> bool {
        self.sql(&format!(
            "SELECT confirmed_flush_lsn <= '{lsn}'::pg_lsn FROM pg_replication_slots WHERE slot_name = '{}'",
            self.slot_name()
        )) == "t"
    }

    /// The oracle: the double's rows of `feldera_table` (each of weight 1, no faults) equal
    /// PostgreSQL's rows of `pg_table`, value by value. Both sides are sorted by the JSON
    /// text of `key`, so the comparison does not depend on either side's order.
    pub fn assert_rows_equal(&self, pg_table: &str, feldera_table: &str, key: &str) {
        let mut pg = self.pg_rows(pg_table, key);
        pg.sort_by(|a, b| a[key].to_string().cmp(&b[key].to_string()));
        let feldera = self.feldera_rows(feldera_table, key);
        assert_eq!(
            feldera, pg,
            "Feldera's {feldera_table} (left) differs from PostgreSQL's {pg_table} (right)"
        );
    }
}

impl Connector {
    /// Waits up to `timeout` until the log has a line containing `needle`.
    pub fn wait_log(&self, needle: &str, timeout: Duration) -> bool {
        wait_for(timeout, || self.log_text().contains(needle).then_some(())).is_some()
    }
}

impl Env {
    /// Runs `sql` as one transaction and returns `pg_current_wal_insert_lsn()` taken inside
    /// it, after its changes and before its commit: a position at or before the commit
    /// record, so a slot confirmed at or before it has not acknowledged this transaction.
    pub fn write_txn(&self, sql: &str) -> String {
        self.sql(&format!(
            "BEGIN; {sql}; SELECT pg_current_wal_insert_lsn(); COMMIT;"
        ))
    }

    /// Row changes (pgoutput Insert, Update, Delete messages) still waiting in the slot for
    /// publication `pub`: what a restart would replay. Peeks without consuming; only
    /// possible while no connector holds the slot.
    pub fn slot_pending_changes(&self) -> usize {
        let out = self.sql(&format!(
            "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('{}', NULL, NULL, \
             'proto_version', '1', 'publication_names', 'pub') WHERE get_byte(data, 0) IN (73, 85, 68)",
            self.slot_name()
        ));
        out.parse()
            .unwrap_or_else(|_| panic!("cannot count pending changes: {out:?}"))
    }
}

// Helpers for the acknowledgement and stop tests (e2e_acks.rs, e2e_stop.rs).
impl Env {
    /// Rows carried by every ingress request the double accepted (200) since its log was
    /// last cleared: how many rows the connector delivered, replays included.
    pub fn ingress_rows(&self) -> u64 {
        self.feldera
            .requests()
            .iter()
            .filter(|r| r.endpoint == "ingress" && r.status == 200)
            .map(|r| r.rows.unwrap_or(0))
            .sum()
    }

    /// Rows of `table` the double accepted (200) since its log was last cleared.
    pub fn ingress_rows_of(&self, table: &str) -> u64 {
        self.feldera
            .requests()
            .iter()
            .filter(|r| {
                r.endpoint == "ingress" && r.status == 200 && r.table.as_deref() == Some(table)
            })
            .map(|r| r.rows.unwrap_or(0))
            .sum()
    }

    /// Replication slots of this environment's database, by name, comma-separated.
    pub fn slots(&self) -> String {
        self.sql(&format!(
            "SELECT string_agg(slot_name, ',' ORDER BY slot_name) FROM pg_replication_slots WHERE database = '{}'",
            self.db
        ))
    }

    /// Sends `rows` to the double's `table` as inserts, as another writer of the pipeline
    /// would (ghosts and stale rows a copy must repair).
    pub fn ingest(&self, table: &str, rows: &[Value]) {
        let body: String = rows
            .iter()
            .map(|row| format!("{}\n", serde_json::json!({ "insert": row })))
            .collect();
        let url = format!(
            "{}/v0/pipelines/{}/ingress/{table}?format=json&update_format=insert_delete",
            self.feldera.base_url(),
            self.feldera.pipeline_name()
        );
        let response = ureq::post(&url)
            .send(body.as_bytes())
            .expect("ingest into the double");
        assert_eq!(response.status().as_u16(), 200);
    }

    /// `a >= b` for two LSNs in PostgreSQL's text form, compared by PostgreSQL.
    pub fn lsn_at_least(&self, a: &str, b: &str) -> bool {
        self.sql(&format!("SELECT '{a}'::pg_lsn >= '{b}'::pg_lsn")) == "t"
    }

    /// The walsender serving this environment's slot: `(pid, write_lsn, flush_lsn)` from
    /// `pg_stat_replication`, or `None` when no process holds the slot.
    pub fn walsender(&self) -> Option<(String, String, String)> {
        let out = self.sql(&format!(
            "SELECT r.pid || ' ' || coalesce(r.write_lsn::text, '-') || ' ' || coalesce(r.flush_lsn::text, '-') \
             FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid \
             WHERE s.slot_name = '{}'",
            self.slot_name()
        ));
        let mut parts = out.split(' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(pid), Some(write), Some(flush)) if !pid.is_empty() => {
                Some((pid.to_owned(), write.to_owned(), flush.to_owned()))
            }
            _ => None,
        }
    }
}

// Helpers for the snapshot and TRUNCATE tests (e2e_snapshot.rs, e2e_truncate.rs).
impl Env {
    /// The state file this environment's connector writes: `<STATE_DIR>/<slot>.state.json`.
    pub fn state_path(&self) -> PathBuf {
        self.state_dir
            .join(format!("{}.state.json", self.slot_name()))
    }

    /// The state file's bytes, or `None` when it does not exist.
    pub fn state_bytes(&self) -> Option<Vec<u8>> {
        match std::fs::read(self.state_path()) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => panic!("cannot read {}: {e}", self.state_path().display()),
        }
    }

    /// The state file as JSON, or `None` when it does not exist (panics when it does not
    /// parse: the connector writes whole files only).
    pub fn state(&self) -> Option<Value> {
        self.state_bytes().map(|bytes| {
            serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                panic!(
                    "the state file {} is not JSON ({e}): {}",
                    self.state_path().display(),
                    String::from_utf8_lossy(&bytes)
                )
            })
        })
    }

    /// The state file's `phase` (`pending` or `complete`), or `None` when there is no file.
    pub fn state_phase(&self) -> Option<String> {
        self.state()
            .map(|state| state["phase"].as_str().unwrap_or_default().to_owned())
    }

    /// Waits until the connector wrote `complete` into the state file and caught up with
    /// every commit so far.
    pub fn wait_snapshot_complete_and_caught_up(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let complete = wait_for(timeout, || {
            (self.state_phase().as_deref() == Some("complete")).then_some(())
        });
        complete.is_some()
            && self.wait_caught_up(deadline.saturating_duration_since(Instant::now()))
    }

    /// The server's `system_identifier` (`pg_control_system()`), as text.
    pub fn system_identifier(&self) -> String {
        self.sql("SELECT system_identifier FROM pg_control_system()")
    }

    /// The number of rows of `table` in the double (processed state), or 0 when it holds none.
    pub fn feldera_count(&self, table: &str) -> usize {
        self.feldera.table(table).map_or(0, |t| t.rows.len())
    }
}

impl Connector {
    /// The process's peak resident set size so far in KiB (`VmHWM` of `/proc/<pid>/status`),
    /// or `None` once it has exited.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
    }
}

/// A background writer: commits one transaction after another through `psql` until stopped.
/// `next(n)` gives the SQL of the n-th transaction (from 0); each runs as one `psql -c`, so
/// as one transaction when it holds several statements.
pub struct Writer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    committed: std::sync::Arc<std::sync::atomic::AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("committed", &self.committed())
            .finish()
    }
}

impl Writer {
    /// Starts writing into `db` of `pg`; a pause of `pause` separates transactions.
    pub fn start(
        pg: &'static PgCluster,
        db: &str,
        pause: Duration,
        mut next: impl FnMut(u64) -> String + Send + 'static,
    ) -> Writer {
        use std::sync::atomic::{AtomicBool, AtomicU64};
        use std::sync::Arc;
        let stop = Arc::new(AtomicBool::new(false));
        let committed = Arc::new(AtomicU64::new(0));
        let db = db.to_owned();
        let thread = {
            let (stop, committed) = (stop.clone(), committed.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let n = committed.load(Ordering::Relaxed);
                    pg.psql(&db, &next(n));
                    committed.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(pause);
                }
            })
        };
        Writer {
            stop,
            committed,
            thread: Some(thread),
        }
    }

    /// Transactions committed so far.
    pub fn committed(&self) -> u64 {
        self.committed.load(Ordering::Relaxed)
    }

    /// Waits until at least `count` transactions are committed (in all, since the start).
    pub fn wait_committed(&self, count: u64, timeout: Duration) -> bool {
        wait_for(timeout, || (self.committed() >= count).then_some(())).is_some()
    }

    /// Stops after the transaction in progress; returns how many were committed. A panic of
    /// the writer's thread (a failed statement) is raised here.
    pub fn stop(mut self) -> u64 {
        self.halt();
        self.committed()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() && !std::thread::panicking() {
                panic!("the background writer failed (see its psql error above)");
            }
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.halt();
    }
}

/// What an operator's command (`check`, `status`, `ddl`, ...) printed and how it exited.
#[derive(Debug)]
pub struct Outcome {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `<binary> <args>` with exactly `pairs` as its environment (and `PATH`).
pub fn operation(shell: Shell, pairs: &[(String, String)], args: &[&str]) -> Outcome {
    let mut command = Command::new(shell.binary());
    command.env_clear();
    command.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (k, v) in pairs {
        command.env(k, v);
    }
    let out = command
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run the operation");
    Outcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
