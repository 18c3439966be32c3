//! A throwaway PostgreSQL cluster for tests: `initdb`, start on a free port with
//! `wal_level=logical`, run SQL through `psql`, and remove everything on drop.
//!
//! Works as root (the server refuses to run as root, so the cluster runs as the `postgres`
//! OS user through `runuser`) and as an ordinary user (binaries run directly). A watchdog
//! process stops the cluster and removes its directory if the test process dies without
//! running destructors (SIGKILL, `process::exit`), so no `postgres` process outlives a test
//! run. When no PostgreSQL binaries can be found the harness panics with a message saying
//! where it looked and how to point it elsewhere: tests never skip silently.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Where to look for `initdb`, `pg_ctl` and `postgres`, in order: `$SLOTLINE_PG_BIN`,
/// the newest `/usr/lib/postgresql/*/bin`, then `pg_config --bindir`.
pub fn find_pg_bin() -> Result<PathBuf, String> {
    search_pg_bin(
        std::env::var_os("SLOTLINE_PG_BIN").map(PathBuf::from),
        Path::new("/usr/lib/postgresql"),
        "pg_config",
    )
}

/// `find_pg_bin` with its three places given explicitly (so the failure path is testable).
pub fn search_pg_bin(
    env_dir: Option<PathBuf>,
    debian_root: &Path,
    pg_config: &str,
) -> Result<PathBuf, String> {
    let mut tried = Vec::new();
    if let Some(dir) = env_dir {
        if has_server_binaries(&dir) {
            return Ok(dir);
        }
        tried.push(format!("$SLOTLINE_PG_BIN={}", dir.display()));
    }
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir(debian_root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    debian.sort();
    if let Some((_, dir)) = debian
        .iter()
        .rev()
        .find(|(_, dir)| has_server_binaries(dir))
    {
        return Ok(dir.clone());
    }
    tried.push(format!("{}/*/bin", debian_root.display()));
    if let Ok(out) = Command::new(pg_config).arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && has_server_binaries(&dir) {
            return Ok(dir);
        }
        tried.push(format!("pg_config --bindir ({})", dir.display()));
    } else {
        tried.push(format!("{pg_config} (not found)"));
    }
    Err(format!(
        "no PostgreSQL server binaries (initdb, pg_ctl, postgres) found; looked in: {}. \
         Install them (`apt-get install -y postgresql`, which .ci/run does) or set \
         SLOTLINE_PG_BIN to a directory that has them.",
        tried.join(", ")
    ))
}

fn has_server_binaries(dir: &Path) -> bool {
    ["initdb", "pg_ctl", "postgres"]
        .iter()
        .all(|b| dir.join(b).is_file())
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Uid:"))
                .and_then(|line| line.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

/// Server settings beyond the harness's defaults (`-c name=value` pairs).
#[derive(Clone, Debug, Default)]
pub struct ClusterOptions {
    pub settings: Vec<(String, String)>,
}

impl ClusterOptions {
    pub fn setting(mut self, name: &str, value: &str) -> Self {
        self.settings.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// A running throwaway cluster. Dropping it stops the server and removes its directory.
#[derive(Debug)]
pub struct PgCluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    as_postgres_user: bool,
    options: ClusterOptions,
    watchdog: Option<std::process::Child>,
}

static CLUSTER_COUNTER: AtomicU32 = AtomicU32::new(0);

impl PgCluster {
    /// Starts a cluster with the default settings, or panics saying why it could not.
    pub fn start() -> PgCluster {
        Self::start_with(ClusterOptions::default())
    }

    pub fn start_with(options: ClusterOptions) -> PgCluster {
        let bin = find_pg_bin().unwrap_or_else(|why| panic!("{why}"));
        let as_postgres_user = running_as_root();
        let dir = std::env::temp_dir().join(format!(
            "slotline-pg-{}-{}-{}",
            std::process::id(),
            CLUSTER_COUNTER.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ));
        std::fs::create_dir_all(&dir).expect("create the cluster directory");
        let mut cluster = PgCluster {
            bin,
            dir,
            port: 0,
            as_postgres_user,
            options,
            watchdog: None,
        };
        cluster.prepare_directory();
        cluster.start_watchdog();
        cluster.initdb();
        cluster.start_server_on_free_port();
        cluster
    }

    fn prepare_directory(&self) {
        set_mode(&self.dir, 0o700);
        if self.as_postgres_user {
            let status = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&self.dir)
                .status()
                .expect("run chown");
            assert!(
                status.success(),
                "chown postgres {} failed",
                self.dir.display()
            );
        }
    }

    /// A detached shell that waits for this test process to end, then stops the server and
    /// removes the directory: the safety net for exits that skip `Drop`.
    fn start_watchdog(&mut self) {
        let pg_ctl = self.as_user_command_line(&format!(
            "'{}' -D '{}' -m immediate -w -t 10 stop",
            self.bin.join("pg_ctl").display(),
            self.data_dir().display()
        ));
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             if [ -f '{data}/postmaster.pid' ]; then {pg_ctl} >/dev/null 2>&1; fi; rm -rf '{dir}'",
            pid = std::process::id(),
            data = self.data_dir().display(),
            dir = self.dir.display(),
        );
        let child = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the cluster watchdog");
        self.watchdog = Some(child);
    }

    fn as_user_command_line(&self, command: &str) -> String {
        if self.as_postgres_user {
            format!("runuser -u postgres -- {command}")
        } else {
            command.to_owned()
        }
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres_user {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        }
    }

    fn run(&self, what: &str, cmd: &mut Command) -> Output {
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        if !out.status.success() {
            panic!(
                "{what} failed ({}):\n{}{}\nserver log:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                self.server_log_tail()
            );
        }
        out
    }

    fn initdb(&self) {
        let mut cmd = self.command("initdb");
        cmd.arg("-D").arg(self.data_dir());
        cmd.args([
            "--auth=trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-locale",
            "-N",
        ]);
        self.run("initdb", &mut cmd);
    }

    fn start_server_on_free_port(&mut self) {
        let mut last_error = String::new();
        for _ in 0..5 {
            self.port = free_port();
            match self.try_start() {
                Ok(()) => return,
                Err(why) => last_error = why,
            }
        }
        panic!("PostgreSQL did not start after 5 attempts: {last_error}");
    }

    fn server_options(&self) -> String {
        let mut settings = vec![
            ("wal_level", "logical".to_owned()),
            ("max_replication_slots", "20".to_owned()),
            ("max_wal_senders", "20".to_owned()),
            ("port", self.port.to_string()),
            ("listen_addresses", "127.0.0.1".to_owned()),
            ("unix_socket_directories", self.dir.display().to_string()),
            ("fsync", "off".to_owned()),
            ("full_page_writes", "off".to_owned()),
        ];
        for (name, value) in &self.options.settings {
            settings.retain(|(n, _)| n != name);
            settings.push((name.as_str(), value.clone()));
        }
        settings
            .iter()
            .map(|(n, v)| format!("-c {n}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn try_start(&self) -> Result<(), String> {
        let mut cmd = self.command("pg_ctl");
        cmd.arg("-D").arg(self.data_dir());
        cmd.arg("-l").arg(self.dir.join("server.log"));
        cmd.args(["-w", "-t", "30", "-o", &self.server_options(), "start"]);
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{}{}",
                String::from_utf8_lossy(&out.stderr),
                self.server_log_tail()
            ))
        }
    }

    /// A streaming standby of this cluster, with `options` (`hot_standby_feedback`, ...) on
    /// top of the harness's: a physical slot `standby1` reserves WAL here, this server stops
    /// cleanly, its data directory is copied (the npm packages have no `pg_basebackup`),
    /// this server starts again, then the copy starts in recovery with `primary_conninfo`
    /// (with `dbname`, for slot synchronisation) and `primary_slot_name` pointing here.
    /// Returns once the standby replays this server's current WAL position.
    pub fn standby(&self, options: ClusterOptions) -> PgCluster {
        self.psql(
            "postgres",
            "SELECT pg_catalog.pg_create_physical_replication_slot('standby1', true)",
        );
        let dir = std::env::temp_dir().join(format!(
            "slotline-pg-{}-{}-standby",
            std::process::id(),
            CLUSTER_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create the standby's directory");
        let mut standby = PgCluster {
            bin: self.bin.clone(),
            dir,
            port: 0,
            as_postgres_user: self.as_postgres_user,
            options,
            watchdog: None,
        };
        standby.prepare_directory();
        standby.start_watchdog();
        let mut stop = self.command("pg_ctl");
        stop.arg("-D").arg(self.data_dir());
        stop.args(["-m", "fast", "-w", "-t", "30", "stop"]);
        self.run("pg_ctl stop (to copy the data directory)", &mut stop);
        let mut copy = Command::new("cp");
        copy.arg("-a").arg(self.data_dir()).arg(standby.data_dir());
        self.run("cp -a (the standby's data directory)", &mut copy);
        let _ = std::fs::remove_file(standby.data_dir().join("postmaster.pid"));
        std::fs::write(standby.data_dir().join("standby.signal"), "").expect("standby.signal");
        let auto = standby.data_dir().join("postgresql.auto.conf");
        let mut conf = std::fs::read_to_string(&auto).unwrap_or_default();
        conf.push_str(&format!(
            "primary_conninfo = 'host=127.0.0.1 port={} user=postgres dbname=postgres'\n\
             primary_slot_name = 'standby1'\n",
            self.port
        ));
        std::fs::write(&auto, conf).expect("write the standby's postgresql.auto.conf");
        if self.as_postgres_user {
            let mut chown = Command::new("chown");
            chown
                .args(["-R", "postgres:postgres"])
                .arg(standby.data_dir());
            self.run("chown the standby's data directory", &mut chown);
        }
        self.try_start()
            .unwrap_or_else(|why| panic!("the primary did not start again: {why}"));
        // The port chosen above may have been taken since (the copy takes a while, and
        // other tests' clients bind ephemeral ports): a fresh one per attempt.
        standby.start_server_on_free_port();
        let target = self.psql("postgres", "SELECT pg_catalog.pg_current_wal_lsn()");
        let replayed = wait_for(Duration::from_secs(60), || {
            (standby.psql(
                "postgres",
                &format!("SELECT pg_catalog.pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"),
            ) == "t")
                .then_some(())
        });
        assert!(
            replayed.is_some(),
            "the standby did not replay {target}:\n{}",
            standby.server_log_tail()
        );
        standby
    }

    /// Where `archive_command` copies WAL for `archive_options` (next to the data directory).
    pub fn archive_dir(&self) -> PathBuf {
        self.dir.join("archive")
    }

    /// Archives WAL into `archive_dir` from now on (the server must run with
    /// `archive_mode = on`), for a point-in-time restore (`restore_to`).
    pub fn enable_archive(&self) {
        let archive = self.archive_dir();
        std::fs::create_dir_all(&archive).expect("create the archive directory");
        if self.as_postgres_user {
            let mut chown = Command::new("chown");
            chown.args(["postgres:postgres"]).arg(&archive);
            self.run("chown the archive directory", &mut chown);
        }
        self.psql(
            "postgres",
            &format!(
                "ALTER SYSTEM SET archive_command = 'cp %p {}/%f'",
                archive.display()
            ),
        );
        self.psql("postgres", "SELECT pg_catalog.pg_reload_conf()");
    }

    /// A base backup: the server stops cleanly, its data directory is copied next to it
    /// (the npm packages have no `pg_basebackup`), and it starts again. Returns the copy.
    pub fn base_backup(&self) -> PathBuf {
        let backup = self.dir.join("backup");
        let mut stop = self.command("pg_ctl");
        stop.arg("-D").arg(self.data_dir());
        stop.args(["-m", "fast", "-w", "-t", "30", "stop"]);
        self.run("pg_ctl stop (for a base backup)", &mut stop);
        let mut copy = Command::new("cp");
        copy.arg("-a").arg(self.data_dir()).arg(&backup);
        self.run("cp -a (the base backup)", &mut copy);
        self.try_start()
            .unwrap_or_else(|why| panic!("the server did not start after the backup: {why}"));
        backup
    }

    /// A point-in-time restore: the server crashes, its data directory is replaced by
    /// `backup`, and it recovers from the archive up to `target` (an LSN), then promotes:
    /// a new timeline from there. Returns once it accepts writes.
    pub fn restore_to(&self, backup: &Path, target: &str) {
        self.stop_server();
        let _ = std::fs::remove_dir_all(self.data_dir());
        let mut copy = Command::new("cp");
        copy.arg("-a").arg(backup).arg(self.data_dir());
        self.run("cp -a (the backup back)", &mut copy);
        let _ = std::fs::remove_file(self.data_dir().join("postmaster.pid"));
        std::fs::write(self.data_dir().join("recovery.signal"), "").expect("recovery.signal");
        let auto = self.data_dir().join("postgresql.auto.conf");
        let mut conf = std::fs::read_to_string(&auto).unwrap_or_default();
        // No connections before the restore ends (`hot_standby = off`): a client sees a
        // server starting up, not one in recovery.
        conf.push_str(&format!(
            "restore_command = 'cp {}/%f %p'\nrecovery_target_lsn = '{target}'\n\
             recovery_target_action = 'promote'\nhot_standby = off\n",
            self.archive_dir().display()
        ));
        std::fs::write(&auto, conf).expect("write postgresql.auto.conf");
        if self.as_postgres_user {
            let mut chown = Command::new("chown");
            chown.args(["-R", "postgres:postgres"]).arg(self.data_dir());
            self.run("chown the restored data directory", &mut chown);
        }
        self.try_start()
            .unwrap_or_else(|why| panic!("the restored server did not start: {why}"));
        // Refused while it recovers (`hot_standby = off`).
        let promoted = wait_for(Duration::from_secs(60), || {
            let answer = self.try_psql("postgres", "SELECT pg_catalog.pg_is_in_recovery()");
            (answer.as_deref() == Ok("f")).then_some(())
        });
        assert!(
            promoted.is_some(),
            "the restore did not finish:\n{}",
            self.server_log_tail()
        );
    }

    /// Stops the server immediately, like a crash; it stays down.
    pub fn crash(&self) {
        self.stop_server();
    }

    /// A standby leaves recovery (`pg_ctl promote`, waiting until it accepts writes).
    pub fn promote(&self) {
        let mut cmd = self.command("pg_ctl");
        cmd.arg("-D").arg(self.data_dir());
        cmd.args(["-w", "-t", "60", "promote"]);
        self.run("pg_ctl promote", &mut cmd);
    }

    /// Stops the server cleanly and starts it on `port` (a promoted standby taking over
    /// the address of the primary it replaces).
    pub fn move_to_port(&mut self, port: u16) {
        let mut stop = self.command("pg_ctl");
        stop.arg("-D").arg(self.data_dir());
        stop.args(["-m", "fast", "-w", "-t", "30", "stop"]);
        self.run("pg_ctl stop (to move the server)", &mut stop);
        self.port = port;
        self.try_start()
            .unwrap_or_else(|why| panic!("PostgreSQL did not start on port {port}: {why}"));
    }

    /// Stops the server immediately (like a crash) and starts it again on the same port.
    pub fn restart(&self) {
        self.stop_server();
        self.try_start()
            .unwrap_or_else(|why| panic!("PostgreSQL restart failed: {why}"));
    }

    fn stop_server(&self) {
        if !self.data_dir().join("postmaster.pid").exists() {
            return;
        }
        let mut cmd = self.command("pg_ctl");
        cmd.arg("-D").arg(self.data_dir());
        cmd.args(["-m", "immediate", "-w", "-t", "30", "stop"]);
        let _ = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn host(&self) -> &'static str {
        "127.0.0.1"
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The directory of the server's Unix socket.
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    /// Writes a file the server reads (a certificate, a key) next to its data directory,
    /// readable only by the server's OS user; returns its path.
    pub fn write_server_file(&self, name: &str, contents: &[u8]) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.join(name);
        std::fs::write(&path, contents).expect("write a server file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .expect("chmod a server file");
        if self.as_postgres_user {
            let status = Command::new("chown")
                .arg("postgres")
                .arg(&path)
                .status()
                .expect("run chown");
            assert!(status.success(), "chown postgres {} failed", path.display());
        }
        path
    }

    /// Puts `rules` above the existing `pg_hba.conf` entries and reloads the configuration
    /// (with `settings`, `ALTER SYSTEM` statements run first).
    pub fn reconfigure(&self, rules: &str, settings: &[(&str, &str)]) {
        let hba = self.data_dir().join("pg_hba.conf");
        let old = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
        std::fs::write(&hba, format!("{rules}{old}")).expect("write pg_hba.conf");
        for (name, value) in settings {
            self.psql("postgres", &format!("ALTER SYSTEM SET {name} = '{value}'"));
        }
        self.psql("postgres", "SELECT pg_reload_conf()");
    }

    /// A libpq-style URL for the superuser `postgres` (trust authentication, no password).
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Creates a database and returns its name.
    pub fn create_database(&self, name: &str) -> String {
        self.psql("postgres", &format!("CREATE DATABASE \"{name}\""));
        name.to_owned()
    }

    /// Runs SQL through `psql` (unaligned, tuples only, stop at the first error) and returns
    /// its standard output; panics with psql's error output and the server log on failure.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let mut cmd = self.psql_command(database);
        cmd.args(["-c", sql]);
        let out = self.run(&format!("psql {sql:?}"), &mut cmd);
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
    }

    /// `psql`, with psql's error output as the error instead of a panic.
    pub fn try_psql(&self, database: &str, sql: &str) -> Result<String, String> {
        let mut cmd = self.psql_command(database);
        cmd.args(["-c", sql]);
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// `psql` as the superuser on `database`: no psqlrc, quiet, unaligned, tuples only,
    /// stopping at the first error.
    fn psql_command(&self, database: &str) -> Command {
        let mut cmd = Command::new(self.psql_binary());
        cmd.args([
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            "127.0.0.1",
        ]);
        cmd.args([
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
            "-d",
            database,
        ]);
        cmd
    }

    fn psql_binary(&self) -> PathBuf {
        let local = self.bin.join("psql");
        if local.is_file() {
            local
        } else {
            PathBuf::from("psql")
        }
    }

    /// The whole server log so far (every test of the binary that shares this cluster).
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// The last lines of the server log, for failure messages.
    pub fn server_log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        self.stop_server();
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {mode:o} {}: {e}", path.display()));
}

/// A port for a server, below the kernel's ephemeral range: a stopped server's port (a
/// restart, a promoted standby moving to its primary's address, a standby started after the
/// copy) must not be taken meanwhile by the local end of some outgoing connection, which the
/// kernel picks from that range. Ports are handed out once per process, starting at a place
/// that depends on the process id (so two test processes rarely probe the same ones), and
/// each is checked free by binding it.
fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    const LOW: u32 = 10_000;
    if ephemeral_low <= LOW + 1_000 {
        return ephemeral_port();
    }
    let span = ephemeral_low - LOW;
    let start = std::process::id().wrapping_mul(7_919) % span;
    for _ in 0..span {
        let offset = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = LOW + (start + offset) % span;
        let Ok(port) = u16::try_from(port) else {
            continue;
        };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    ephemeral_port()
}

fn ephemeral_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("bind an ephemeral port on 127.0.0.1")
}

/// Polls `check` every 50 ms until it returns `Some` or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl PgCluster {
    /// Runs one query through `psql` and returns its rows as text columns (`None` for NULL),
    /// the shape the core's catalog parsers take.
    pub fn query_rows(&self, database: &str, sql: &str) -> Vec<Vec<Option<String>>> {
        const NULL: &str = "\u{1}NULL\u{1}";
        let mut cmd = self.psql_command(database);
        cmd.args([
            "-F",
            "\u{1f}",
            "-R",
            "\u{1e}",
            "-P",
            &format!("null={NULL}"),
            "-c",
            sql,
        ]);
        let out = self.run(&format!("psql {sql:?}"), &mut cmd);
        let text = String::from_utf8_lossy(&out.stdout);
        text.trim_end_matches('\n')
            .split('\u{1e}')
            .filter(|line| !line.is_empty())
            .map(|line| {
                line.split('\u{1f}')
                    .map(|field| (field != NULL).then(|| field.to_owned()))
                    .collect()
            })
            .collect()
    }
}
