//! Shared by the `demo` and `e2e-bench` programs (run with `cargo run`, not as tests): the
//! connector binary of the running profile, a connector child process, and a long-lived
//! `psql` session for cheap polling of the slot.
//!
//! Owns: the child processes it starts (a connector is killed on drop, its log removed) and
//! its psql session. Never signals a process it did not start, never edits the cluster's
//! settings.

use slotline_tests::e2e::Shell;
use slotline_tests::pg::find_pg_bin;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// `tokio` → `slotline`, `blocking` → `slotline-blocking`.
pub fn parse_shell(name: &str) -> Result<Shell, String> {
    match name {
        "tokio" => Ok(Shell::Tokio),
        "blocking" => Ok(Shell::Blocking),
        other => Err(format!(
            "unknown shell {other:?}: accepted are tokio and blocking"
        )),
    }
}

/// The connector binary of `shell` built with the profile of the running program, which
/// lives next to it in `target/<profile>/`.
///
/// `cargo run --bin demo` builds only the demo, so the connectors could be missing or stale:
/// the first call runs `cargo build` for them in the same profile (a no-op when fresh).
pub fn connector_binary(shell: Shell) -> Result<PathBuf, String> {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate this program: {e}"))?;
    let dir = exe
        .parent()
        .ok_or_else(|| format!("{} has no parent directory", exe.display()))?;
    let profile_dir = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("debug")
        .to_owned();
    let profile = match profile_dir.as_str() {
        "debug" => "dev",
        other => other,
    };
    let path = dir.join(shell.binary_name());
    BUILT.get_or_init(|| build_connectors(profile)).clone()?;
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{} is missing; build it with `cargo build --profile {profile} -p {}`",
            path.display(),
            shell.binary_name()
        ))
    }
}

/// The nested build of the connector binaries (`e2e::CONNECTOR_BUILD`) for `profile`; it
/// compiles only their two `main.rs`, as `cargo run` compiled every library under them.
/// Without cargo at hand (the program was copied elsewhere) the binaries already present
/// are used.
fn build_connectors(profile: &str) -> Result<(), String> {
    // At run time cargo tells its children where it is; fall back to the cargo that built us.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let shown = format!(
        "cargo build --profile {profile} {}",
        slotline_tests::e2e::CONNECTOR_BUILD.join(" ")
    );
    println!("building the connector binaries if needed ({shown}); cargo's progress follows");
    // Not quiet: on a cold checkout it links two binaries, and cargo's lines show it moving.
    let status = slotline_tests::e2e::connector_build(&cargo, profile).status();
    match status {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("{shown} failed ({s})")),
        Err(e) => {
            eprintln!("cannot run cargo ({e}); using the binaries that are there, if any");
            Ok(())
        }
    }
}

/// The configuration every run shares: `SNAPSHOT_MODE=never`, one publication, the given routes.
pub fn connector_vars(
    pg_url: &str,
    feldera_url: &str,
    publication: &str,
    tables: &str,
    state_dir: &Path,
) -> Vec<(String, String)> {
    [
        ("PG_URL", pg_url.to_owned()),
        ("PG_PUBLICATION", publication.to_owned()),
        ("TABLES", tables.to_owned()),
        ("FELDERA_URL", feldera_url.to_owned()),
        ("FELDERA_PIPELINE", "demo".to_owned()),
        // Both sides start empty, so streaming alone keeps them equal; a caller that starts
        // from existing rows drops this to copy them first (docs/snapshot.md).
        ("SNAPSHOT_MODE", "never".to_owned()),
        ("STATE_DIR", state_dir.display().to_string()),
        ("RUST_LOG", "info".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// A connector child process with its output in a log file. Killed on drop if running.
#[derive(Debug)]
pub struct ConnectorProcess {
    child: Child,
    log: PathBuf,
    keep_log: bool,
    status: Option<ExitStatus>,
}

impl ConnectorProcess {
    /// Starts `binary` with exactly `vars` (plus PATH) as its environment, its output going
    /// to `log` (removed on drop unless `keep_log`).
    pub fn spawn(
        binary: &Path,
        vars: &[(String, String)],
        log: PathBuf,
        keep_log: bool,
    ) -> Result<ConnectorProcess, String> {
        Self::spawn_under(&[], binary, vars, log, keep_log)
    }

    /// As `spawn`, with `wrapper` (a program and its arguments, e.g. `valgrind
    /// --tool=callgrind`) running the binary; an empty `wrapper` runs it directly. The
    /// wrapper execs in the same process, so `pid` is the connector's.
    pub fn spawn_under(
        wrapper: &[String],
        binary: &Path,
        vars: &[(String, String)],
        log: PathBuf,
        keep_log: bool,
    ) -> Result<ConnectorProcess, String> {
        let file = std::fs::File::create(&log)
            .map_err(|e| format!("create the connector log {}: {e}", log.display()))?;
        let err = file
            .try_clone()
            .map_err(|e| format!("clone the log handle: {e}"))?;
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(binary);
                command
            }
            None => Command::new(binary),
        };
        command.env_clear();
        command.env("PATH", std::env::var_os("PATH").unwrap_or_default());
        command.envs(vars.iter().map(|(k, v)| (k, v)));
        let child = command
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("start {}: {e}", binary.display()))?;
        Ok(ConnectorProcess {
            child,
            log,
            keep_log,
            status: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit code if the process has ended (signals as 128+n), without waiting.
    pub fn exit_code(&mut self) -> Option<i32> {
        self.wait_exit(Duration::ZERO)
    }

    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.status.is_none() {
                self.status = self.child.try_wait().ok().flatten();
            }
            if let Some(status) = self.status {
                return Some(code_of(status));
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: no cleanup, no final status update to PostgreSQL.
    pub fn kill(&mut self) -> Option<i32> {
        if self.exit_code().is_none() {
            let _ = self.child.kill();
        }
        self.wait_exit(Duration::from_secs(10))
    }

    /// SIGTERM (graceful stop), then waits up to `timeout` for the exit code.
    pub fn terminate(&mut self, timeout: Duration) -> Option<i32> {
        if self.exit_code().is_none() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.pid().to_string()])
                .status();
        }
        self.wait_exit(timeout)
    }

    /// The last `lines` lines of the connector's output.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

fn code_of(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

impl Drop for ConnectorProcess {
    fn drop(&mut self) {
        self.kill();
        if !self.keep_log {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// One `psql` process kept open: a query costs a round trip, not a process start, so the
/// slot can be polled every few milliseconds without loading the machine.
#[derive(Debug)]
pub struct Psql {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

/// Printed by `\echo` after every query: the end of its output.
const END: &str = "--slotline-end-of-answer--";

impl Psql {
    pub fn connect(port: u16, database: &str) -> Result<Psql, String> {
        let psql = find_pg_bin()
            .map(|dir| dir.join("psql"))
            .ok()
            .filter(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("psql"));
        let mut child = Command::new(psql)
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(["-U", "postgres", "-d", database])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("start psql: {e}"))?;
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .map(BufReader::new)
            .ok_or("psql has no stdout")?;
        Ok(Psql {
            child,
            stdin,
            stdout,
        })
    }

    /// Runs `sql` (one or more statements) and returns the output lines.
    pub fn query(&mut self, sql: &str) -> Result<Vec<String>, String> {
        let stdin = self.stdin.as_mut().ok_or("psql session closed")?;
        writeln!(
            stdin,
            "{};\n\\echo {END}",
            sql.trim_end().trim_end_matches(';')
        )
        .and_then(|()| stdin.flush())
        .map_err(|e| format!("write to psql: {e}"))?;
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            let n = self
                .stdout
                .read_line(&mut line)
                .map_err(|e| format!("read from psql: {e}"))?;
            if n == 0 {
                return Err(format!(
                    "psql ended while running {sql:?} (its error is printed above)"
                ));
            }
            let line = line.trim_end_matches('\n');
            if line == END {
                return Ok(lines);
            }
            lines.push(line.to_owned());
        }
    }

    /// Runs a query that answers exactly one value.
    pub fn value(&mut self, sql: &str) -> Result<String, String> {
        let mut lines = self.query(sql)?;
        match lines.len() {
            1 => Ok(lines.remove(0)),
            n => Err(format!("{sql:?} answered {n} lines, expected one")),
        }
    }

    /// The slot's `confirmed_flush_lsn`, or `None` when there is no such slot.
    pub fn slot_confirmed(&mut self, slot: &str) -> Result<Option<String>, String> {
        let lines = self.query(&format!(
            "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '{slot}'"
        ))?;
        Ok(lines.into_iter().next().filter(|l| !l.is_empty()))
    }

    /// Whether a walsender streams from the slot (a connector is attached and past
    /// START_REPLICATION). `active` alone is not enough: the slot is also active while
    /// `CREATE_REPLICATION_SLOT` runs, and released again until the stream starts.
    pub fn slot_active(&mut self, slot: &str) -> Result<bool, String> {
        let lines = self.query(&format!(
            "SELECT r.state FROM pg_replication_slots s JOIN pg_stat_replication r ON r.pid = s.active_pid \
             WHERE s.slot_name = '{slot}'"
        ))?;
        Ok(matches!(
            lines.first().map(String::as_str),
            Some("catchup" | "streaming")
        ))
    }

    /// Whether the slot exists and confirmed at least `target` (an LSN as text).
    pub fn confirmed_at_least(&mut self, slot: &str, target: &str) -> Result<bool, String> {
        let answer = self.value(&format!(
            "SELECT coalesce(bool_or(confirmed_flush_lsn >= '{target}'::pg_lsn), false) \
             FROM pg_replication_slots WHERE slot_name = '{slot}'"
        ))?;
        Ok(answer == "t")
    }
}

impl Drop for Psql {
    fn drop(&mut self) {
        // Closing stdin ends psql; kill it in case it is stuck in a query.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(2);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
