//! Checks of a shell binary run as a child process, shared by both shell packages (each
//! package's `tests/binary.rs` passes its own `CARGO_BIN_EXE_*`).
//!
//! Every child starts with an empty environment, so the host's `PG*` variables cannot
//! leak in, and in its own empty directory, so "nothing was written" can be checked.

use slotline_core::config::VARIABLES;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A fresh empty directory under the system's temp dir, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(label: &str) -> Scratch {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("slotline-shell-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }

    pub fn entries(&self) -> Vec<String> {
        std::fs::read_dir(&self.0)
            .expect("read scratch")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Listeners standing in for PostgreSQL and Feldera: a child that opens any connection
/// shows up as a pending accept.
pub struct Watched {
    pg: TcpListener,
    feldera: TcpListener,
}

impl Watched {
    pub fn new() -> Watched {
        let bind = || {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.set_nonblocking(true).expect("nonblocking");
            listener
        };
        Watched {
            pg: bind(),
            feldera: bind(),
        }
    }

    /// A complete, valid configuration pointing at the listeners.
    pub fn config(&self, scratch: &Scratch) -> Vec<(String, String)> {
        let pg = self.pg.local_addr().expect("addr");
        let feldera = self.feldera.local_addr().expect("addr");
        [
            (
                "PG_URL",
                format!("postgres://u:secret@{pg}/db?sslmode=disable"),
            ),
            ("PG_PUBLICATION", "pub".to_owned()),
            ("TABLES", "users".to_owned()),
            ("FELDERA_URL", format!("http://{feldera}")),
            ("FELDERA_PIPELINE", "p".to_owned()),
            ("STATE_DIR", scratch.0.join("state").display().to_string()),
        ]
        .map(|(k, v)| (k.to_owned(), v))
        .to_vec()
    }

    pub fn assert_untouched(&self) {
        for (name, listener) in [("PostgreSQL", &self.pg), ("Feldera", &self.feldera)] {
            let accepted = listener.accept();
            assert!(
                matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
                "no connection to {name} may be opened: {accepted:?}"
            );
        }
    }
}

fn command(bin: &str, cwd: &Scratch, env: &[(String, String)], args: &[&str]) -> Command {
    let mut command = Command::new(bin);
    command.env_clear().current_dir(&cwd.0).args(args);
    command.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    command
}

fn run(bin: &str, cwd: &Scratch, env: &[(String, String)], args: &[&str]) -> Output {
    command(bin, cwd, env, args)
        .stdin(Stdio::null())
        .output()
        .expect("run the binary")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The variables only tests use: read, but hidden from `--help`.
const TEST_ONLY: [&str; 2] = ["CRASH_AT", "CRASH_AFTER_BATCHES"];

pub fn help_exits_0_and_lists_every_variable_with_its_default(bin: &str) {
    let scratch = Scratch::new("help");
    let out = run(bin, &scratch, &[], &["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for (variable, default) in VARIABLES {
        if TEST_ONLY.contains(variable) {
            assert!(!help.contains(variable), "--help hides {variable}:\n{help}");
            continue;
        }
        let at = help
            .find(&format!("[env: {variable}"))
            .unwrap_or_else(|| panic!("--help names {variable}:\n{help}"));
        if let Some(default) = default {
            // clap prints the default right after the variable.
            let rest = &help[at..];
            let next_option = rest.find("\n      --").unwrap_or(rest.len());
            assert!(
                rest[..next_option].contains(&format!("[default: {default}]")),
                "{variable} shows [default: {default}]"
            );
        }
    }
    assert!(scratch.entries().is_empty());
}

/// The help text of the option whose flag is `flag`, on one line (clap wraps it).
fn option_help(help: &str, flag: &str) -> String {
    let at = help
        .find(&format!("      {flag} "))
        .unwrap_or_else(|| panic!("--help has no {flag}:\n{help}"));
    let rest = &help[at + 6..];
    let end = rest.find("\n      -").unwrap_or(rest.len());
    rest[..end].split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `--help` promises only what works: the snapshot modes are the accepted ones, no option
/// is described as not working yet, and the crash points (for tests only; the shell's unit
/// tests check the list `--crash-at` documents) are not offered.
pub fn help_tells_the_truth_about_modes_and_crash_points(bin: &str) {
    let scratch = Scratch::new("help-truth");
    let out = run(bin, &scratch, &[], &["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    assert!(!help.contains("--crash-at"), "{help}");
    let modes = option_help(&help, "--snapshot-mode");
    for mode in ["initial", "never", "inconsistent"] {
        assert!(modes.contains(mode), "{modes}");
    }
    let progress = option_help(&help, "--progress-interval-secs");
    assert!(progress.contains("0 turns it off"), "{progress}");
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for stale in [
        "accepted today",
        "writes nothing",
        "not supported yet",
        "until the snapshot",
        "only mode that runs",
        "not implemented",
    ] {
        assert!(!flat.contains(stale), "--help says {stale:?}:\n{help}");
    }
}

pub fn version_exits_0_and_names_the_binary(bin: &str, name: &str) {
    let scratch = Scratch::new("version");
    let out = run(bin, &scratch, &[], &["--version"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    let prefix = format!("{name} {} (commit ", env!("CARGO_PKG_VERSION"));
    let commit = stdout
        .strip_prefix(&prefix)
        .and_then(|rest| rest.strip_suffix(")\n"))
        .unwrap_or_else(|| panic!("{stdout:?} is not {prefix:?}<commit>)"));
    // The commit this test was built from, when git can say (the binary's build.rs asked
    // the same repository).
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    match head {
        Some(head) if std::env::var("SLOTLINE_COMMIT").is_err() => {
            assert_eq!(commit, head, "the commit is HEAD's")
        }
        _ => assert!(!commit.is_empty(), "{stdout}"),
    }
}

pub fn bad_value_exits_2_naming_the_variable_before_any_side_effect(bin: &str) {
    let scratch = Scratch::new("bad-value");
    let watched = Watched::new();
    let mut env = watched.config(&scratch);
    env.push(("BATCH_MAX_ROWS".into(), "ten".into()));
    let out = run(bin, &scratch, &env, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("BATCH_MAX_ROWS=\"ten\" is invalid: a whole number"),
        "{stderr}"
    );
    assert!(!stderr.contains("secret"), "the password is never echoed");
    assert!(out.stdout.is_empty());
    assert!(scratch.entries().is_empty(), "no file written");
    watched.assert_untouched();
}

pub fn bad_flag_value_exits_2_like_the_variable(bin: &str) {
    let scratch = Scratch::new("bad-flag");
    let watched = Watched::new();
    let env = watched.config(&scratch);
    let out = run(bin, &scratch, &env, &["--snapshot-mode", "sometimes"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--snapshot-mode=\"sometimes\" is invalid"),
        "names the flag the user typed: {stderr}"
    );
    watched.assert_untouched();
}

pub fn missing_required_option_exits_2_naming_it(bin: &str) {
    let scratch = Scratch::new("missing");
    let watched = Watched::new();
    let env: Vec<_> = watched
        .config(&scratch)
        .into_iter()
        .filter(|(k, _)| k != "PG_PUBLICATION")
        .collect();
    let out = run(bin, &scratch, &env, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("PG_PUBLICATION is required"),
        "{}",
        text(&out.stderr)
    );
    assert!(scratch.entries().is_empty());
    watched.assert_untouched();
}

pub fn unknown_flag_exits_2(bin: &str) {
    let scratch = Scratch::new("unknown");
    let out = run(bin, &scratch, &[], &["--batch-max-rowz", "5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--batch-max-rowz"));
}

fn wait_with_timeout(child: &mut Child, limit: Duration) -> Option<i32> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status.code().unwrap_or(-1));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// With a valid configuration the binary runs the core; SIGTERM (twice if needed) stops
/// it promptly with the core's code (0 or 1) or the second-signal code 143.
pub fn sigterm_stops_promptly(bin: &str) {
    let scratch = Scratch::new("sigterm");
    let watched = Watched::new();
    let env = watched.config(&scratch);
    let mut child = command(bin, &scratch, &env, &[])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..2 {
        // The process may already have exited; `kill` then fails, which is fine.
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        if let Some(code) = wait_with_timeout(&mut child, Duration::from_secs(5)) {
            assert!(matches!(code, 0 | 1 | 143), "exit code {code}");
            return;
        }
    }
    panic!("the binary ignored two SIGTERMs for 10 s");
}

/// The binary tests, once for each shell: `binary_tests!(env!("CARGO_BIN_EXE_x"), "x");`
#[macro_export]
macro_rules! binary_tests {
    ($bin:expr, $name:literal) => {
        #[test]
        fn help_exits_0_and_lists_every_variable_with_its_default() {
            binary_checks::help_exits_0_and_lists_every_variable_with_its_default($bin);
        }

        #[test]
        fn help_tells_the_truth_about_modes_and_crash_points() {
            binary_checks::help_tells_the_truth_about_modes_and_crash_points($bin);
        }

        #[test]
        fn version_exits_0_and_names_the_binary() {
            binary_checks::version_exits_0_and_names_the_binary($bin, $name);
        }

        #[test]
        fn bad_value_exits_2_naming_the_variable_before_any_side_effect() {
            binary_checks::bad_value_exits_2_naming_the_variable_before_any_side_effect($bin);
        }

        #[test]
        fn bad_flag_value_exits_2_like_the_variable() {
            binary_checks::bad_flag_value_exits_2_like_the_variable($bin);
        }

        #[test]
        fn missing_required_option_exits_2_naming_it() {
            binary_checks::missing_required_option_exits_2_naming_it($bin);
        }

        #[test]
        fn unknown_flag_exits_2() {
            binary_checks::unknown_flag_exits_2($bin);
        }

        #[test]
        fn sigterm_stops_promptly() {
            binary_checks::sigterm_stops_promptly($bin);
        }
    };
}
