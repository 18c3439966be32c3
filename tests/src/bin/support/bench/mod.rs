//! What the `e2e-bench` suites share: the connector runs they start, the measurements of
//! processes through `/proc`, and the description of the machine a run happened on.
//!
//! Owns: reading `/proc` (CPU ticks, peak and current RSS, load average), timing external
//! commands, and starting a connector for one measured run. Never asserts a figure: the
//! programs print what they measured and a person compares.

pub mod add_table;
pub mod idle;
pub mod latency;
pub mod retract;
pub mod snapshot;
pub mod stream;

use crate::support::{self, ConnectorProcess};
use slotline_tests::e2e::Shell;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// What every suite is told on the command line.
#[derive(Clone, Debug, Default)]
pub struct Common {
    /// Extra connector variables (`--env KEY=VALUE`).
    pub extra: Vec<(String, String)>,
    /// Keep each connector's log in this directory.
    pub log_dir: Option<PathBuf>,
    /// Run each connector under this command (e.g. `valgrind --tool=callgrind`).
    pub wrapper: Vec<String>,
}

/// One connector binary a suite runs.
#[derive(Clone, Debug)]
pub struct Binary {
    pub shell: Shell,
    pub path: PathBuf,
    /// What every table calls it: the binary's name, with `@base` for a `--baseline` one.
    /// Runs are paired by label (a shell may run from two builds).
    pub label: String,
}

/// Suffix of the labels of the binaries given with `--baseline`.
const BASELINE_SUFFIX: &str = "@base";

/// The connector binaries of the shells asked for: from `dir` when given (no build), else
/// built in this program's profile; with `baseline`, each shell's binary there too, right
/// after the other, so the suites alternate the two builds run by run.
pub fn binaries(
    shells: &[Shell],
    dir: Option<&Path>,
    baseline: Option<&Path>,
) -> Result<Vec<Binary>, String> {
    let mut out = Vec::new();
    for shell in shells {
        let path = match dir {
            Some(dir) => binary_in(dir, *shell)?,
            None => support::connector_binary(*shell)?,
        };
        out.push(Binary {
            shell: *shell,
            path,
            label: shell.binary_name().to_owned(),
        });
        if let Some(baseline) = baseline {
            out.push(Binary {
                shell: *shell,
                path: binary_in(baseline, *shell)?,
                label: format!("{}{BASELINE_SUFFIX}", shell.binary_name()),
            });
        }
    }
    if cfg!(debug_assertions) {
        println!("WARNING: debug build; run with --release for figures");
    } else {
        println!("release build: figures are meaningful");
    }
    Ok(out)
}

/// `dir/<binary name of shell>`, which must exist.
fn binary_in(dir: &Path, shell: Shell) -> Result<PathBuf, String> {
    let path = dir.join(shell.binary_name());
    match path.is_file() {
        true => Ok(path),
        false => Err(format!("{} is not a file", path.display())),
    }
}

/// One connector process started for one measured run, with its log and state directory
/// (removed on drop unless the log is kept).
#[derive(Debug)]
pub struct Launched {
    pub process: ConnectorProcess,
    pub log: PathBuf,
    pub started: Instant,
    state_dir: PathBuf,
}

impl Launched {
    /// Starts `binary` with `vars` plus the common extras, logging to `<name>.log`.
    pub fn start(
        common: &Common,
        binary: &Path,
        name: &str,
        mut vars: Vec<(String, String)>,
        state_dir: PathBuf,
    ) -> Result<Launched, String> {
        vars.extend(common.extra.iter().cloned());
        let (log, keep) = match &common.log_dir {
            Some(dir) => (dir.join(format!("{name}.log")), true),
            None => (state_dir.join("connector.log"), false),
        };
        let started = Instant::now();
        let process = match common.wrapper.is_empty() {
            true => ConnectorProcess::spawn(binary, &vars, log.clone(), keep)?,
            false => {
                ConnectorProcess::spawn_under(&common.wrapper, binary, &vars, log.clone(), keep)?
            }
        };
        Ok(Launched {
            process,
            log,
            started,
            state_dir,
        })
    }

    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Fails when the connector has exited.
    pub fn check_running(&mut self) -> Result<(), String> {
        match self.process.exit_code() {
            Some(code) => Err(self.failure(&format!("the connector exited with {code}"))),
            None => Ok(()),
        }
    }

    pub fn failure(&self, what: &str) -> String {
        format!("{what}; connector log:\n{}", self.process.log_tail(30))
    }

    /// Whether the connector's log holds `needle` yet.
    pub fn logged(&self, needle: &str) -> bool {
        std::fs::read_to_string(&self.log).is_ok_and(|text| text.contains(needle))
    }

    /// SIGTERM, then SIGKILL if it does not stop within 10 s.
    pub fn stop(&mut self) {
        self.process.terminate(Duration::from_secs(10));
        self.process.kill();
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.state_dir);
    }
}

/// A fresh state directory for run `name`.
pub fn state_dir(name: &str) -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("slotline-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Polls `check` every `every` until it answers `true`, failing after `timeout`.
pub fn poll_until(
    timeout: Duration,
    every: Duration,
    what: &str,
    mut check: impl FnMut() -> Result<bool, String>,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        if check()? {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!("timed out after {timeout:?} waiting for {what}"));
        }
        std::thread::sleep(every);
    }
}

/// Runs `command` to its end with its output discarded; its wall-clock time.
pub fn time_command(what: &str, command: &mut Command) -> Result<Duration, String> {
    let started = Instant::now();
    let output = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|e| format!("start {what}: {e}"))?;
    let took = started.elapsed();
    if !output.status.success() {
        return Err(format!(
            "{what} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(took)
}

/// utime + stime of a process in seconds (fields 14 and 15 of /proc/<pid>/stat), 0 when
/// it is gone.
pub fn cpu_seconds(pid: u32) -> f64 {
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

pub fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// A `Name:   1234 kB` line of a /proc file, in KiB.
fn kib_field(path: &str, field: &str) -> Option<u64> {
    std::fs::read_to_string(path)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

fn status_kib(pid: u32, field: &str) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    kib_field(&path, field).ok_or_else(|| format!("no {field} in {path}"))
}

/// `VmHWM`: the most resident memory the process ever had.
pub fn peak_rss_kib(pid: u32) -> Result<u64, String> {
    status_kib(pid, "VmHWM:")
}

pub fn current_rss_kib(pid: u32) -> Result<u64, String> {
    status_kib(pid, "VmRSS:")
}

pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// The first three fields of /proc/loadavg: other work on the machine skews the figures.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// The UTC date and time, from `date` (no time crate for one line of a report).
pub fn utc_now() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M:%S UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// What the machine was: CPU, cores, memory, kernel, load at the end.
pub fn machine() -> Vec<String> {
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
        format!("finished: {}", utc_now()),
        format!("CPU: {model}, {cores} cores available to this process"),
        format!("load average at the end (1, 5, 15 min): {}", load_average()),
        format!("memory: {}", mem.map_or("unknown".to_owned(), mib)),
        format!("kernel: Linux {}", kernel.trim()),
    ]
}

/// Connector CPU seconds per 100,000 rows.
pub fn cpu_per_100k(cpu_s: f64, rows: u64) -> f64 {
    cpu_s * 100_000.0 / rows.max(1) as f64
}

/// Whether `binary` knows the variable `name` (its `--help` lists every variable it reads).
pub fn knows_variable(binary: &Path, name: &str) -> bool {
    Command::new(binary)
        .arg("--help")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(name))
}

/// The value of connector variable `name` in effect: the extras, else the product default.
pub fn setting(common: &Common, name: &str) -> String {
    common
        .extra
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .or_else(|| {
            slotline_core::config::VARIABLES
                .iter()
                .find(|(k, _)| *k == name)
                .and_then(|(_, d)| d.map(str::to_owned))
        })
        .unwrap_or_else(|| "unset".to_owned())
}
