//! End to end: what an operator sees, whatever the log settings.
//!
//! - A non-zero exit always says why on stderr: at ERROR when the log shows errors, as one
//!   plain last line when `RUST_LOG` hides them, never twice. Checked for the codes 2
//!   (configuration), 1 (refused start) and 69 (no durable progress).
//! - While rows flow, a progress line appears every `PROGRESS_INTERVAL_SECS`; an idle
//!   stream logs none.

use serde_json::json;
use slotline_tests::e2e::{Env, Shell};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text);
CREATE PUBLICATION pub FOR TABLE users;";

fn schema() -> serde_json::Value {
    let field = |name: &str, ty: &str| json!({"name": name, "case_sensitive": false, "columntype": {"type": ty, "nullable": true}});
    json!({"inputs": [{"name": "users", "case_sensitive": false, "materialized": false,
                       "properties": {}, "primary_key": ["id"],
                       "fields": [field("id", "BIGINT"), field("name", "VARCHAR")]}],
           "outputs": []})
}

/// What a finished run left: its exit code and what it wrote on each stream.
#[derive(Debug)]
struct Finished {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `shell` with exactly `pairs` as its environment (plus PATH) until it exits (killed
/// after `limit`), with stdout and stderr kept apart.
fn run_to_exit(shell: Shell, pairs: &[(String, String)], label: &str, limit: Duration) -> Finished {
    let dir = std::env::temp_dir().join(format!(
        "slotline-operator-{label}-{}-{}",
        shell.binary_name(),
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let (out_path, err_path): (PathBuf, PathBuf) = (dir.join("stdout"), dir.join("stderr"));
    let mut child = Command::new(shell.binary())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(pairs.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("spawn the connector");
    let started = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status.code();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |p: &PathBuf| std::fs::read_to_string(p).unwrap_or_default();
    let finished = Finished {
        code,
        stdout: read(&out_path),
        stderr: read(&err_path),
    };
    let _ = std::fs::remove_dir_all(&dir);
    finished
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// The exit line of a fatal exit, checked for `rust_log`: once at ERROR when errors are
/// logged, once as a plain line (the binary's name first, no level) when they are not.
fn assert_reason_on_stderr(
    shell: Shell,
    run: &Finished,
    rust_log: &str,
    code: i32,
    needles: &[&str],
) {
    let context = format!("{shell:?} RUST_LOG={rust_log}: {run:#?}");
    assert_eq!(run.code, Some(code), "{context}");
    let exit_line = format!("exiting with code {code}: ");
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains(&exit_line))
        .collect();
    assert_eq!(lines.len(), 1, "exactly one exit line: {context}");
    let line = lines[0];
    match rust_log {
        "off" => {
            let plain = format!("{}: {exit_line}", shell.binary_name());
            assert!(line.starts_with(&plain), "a plain line: {context}");
            assert!(
                !run.stderr.contains("ERROR") && !run.stderr.contains("INFO"),
                "nothing else is logged: {context}"
            );
        }
        _ => {
            assert!(line.contains("ERROR"), "logged at ERROR: {context}");
            assert!(!run.stderr.contains("INFO"), "{context}");
        }
    }
    for needle in needles {
        assert!(
            line.contains(needle),
            "the exit line says {needle:?}: {context}"
        );
    }
    assert!(run.stdout.is_empty(), "{context}");
}

fn exit_reasons_reach_stderr_whatever_rust_log_says(shell: Shell) {
    let env = Env::new("exits", SETUP, schema());
    for rust_log in ["off", "error"] {
        // 2: a bad value, refused before anything is opened; the startup message is the
        // process's last line, printed whatever RUST_LOG says.
        let config = env.config(&[
            ("TABLES", "users"),
            ("BATCH_MAX_ROWS", "0"),
            ("RUST_LOG", rust_log),
        ]);
        let run = run_to_exit(shell, &config, "usage", Duration::from_secs(30));
        assert_eq!(run.code, Some(2), "{run:#?}");
        let last = run.stderr.lines().last().unwrap_or_default();
        assert!(
            last.starts_with(&format!(
                "{}: BATCH_MAX_ROWS=\"0\" is invalid",
                shell.binary_name()
            )),
            "{rust_log}: {run:#?}"
        );
        assert_eq!(run.stderr.lines().count(), 1, "said once: {run:#?}");

        // 1: the publication does not exist: the start is refused.
        let config = env.config(&[
            ("TABLES", "users"),
            ("PG_PUBLICATION", "no_such_pub"),
            ("RUST_LOG", rust_log),
        ]);
        let run = run_to_exit(shell, &config, "refused", Duration::from_secs(60));
        assert_reason_on_stderr(shell, &run, rust_log, 1, &["no_such_pub", "does not exist"]);

        // 69: Feldera never answers, so the run gives up at once (`never-reached`); the
        // reason names the deadline it does not wait for, the last failure, where Feldera
        // was looked for and `slotline check`.
        let port = closed_port();
        let feldera = format!("http://127.0.0.1:{port}");
        let config = env.config(&[
            ("TABLES", "users"),
            ("FELDERA_URL", &feldera),
            ("NO_PROGRESS_TIMEOUT_SECS", "1"),
            ("RUST_LOG", rust_log),
        ]);
        let run = run_to_exit(shell, &config, "noprogress", Duration::from_secs(60));
        let at = format!("Feldera at {feldera}");
        assert_reason_on_stderr(
            shell,
            &run,
            rust_log,
            69,
            &[
                "NO_PROGRESS_TIMEOUT_SECS",
                "the last failure",
                &at,
                "never reached Feldera",
                "slotline check",
            ],
        );
    }
}

#[test]
fn exit_reasons_reach_stderr_whatever_rust_log_says_tokio() {
    exit_reasons_reach_stderr_whatever_rust_log_says(Shell::Tokio);
}

#[test]
fn exit_reasons_reach_stderr_whatever_rust_log_says_blocking() {
    exit_reasons_reach_stderr_whatever_rust_log_says(Shell::Blocking);
}

fn progress_lines(log: &str) -> usize {
    log.lines().filter(|l| l.contains("progress: ")).count()
}

fn progress_line_during_a_workload_and_none_while_idle(shell: Shell) {
    let env = Env::new("progress", SETUP, schema());
    let mut connector = env.start(
        shell,
        &[("TABLES", "users"), ("PROGRESS_INTERVAL_SECS", "1")],
    );
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "not streaming:\n{}",
        connector.log_text()
    );
    assert_eq!(
        progress_lines(&connector.log_text()),
        0,
        "nothing happened yet"
    );
    // About three seconds of small transactions.
    for id in 1..=30 {
        env.sql(&format!("INSERT INTO users VALUES ({id}, 'u{id}')"));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        connector.wait_log("progress: streaming; in the last", Duration::from_secs(10)),
        "no progress line during the workload:\n{}",
        connector.log_text()
    );
    assert!(env.wait_caught_up(Duration::from_secs(30)));
    // The interval that held the last rows reports them; after it, nothing.
    std::thread::sleep(Duration::from_millis(1500));
    let log = connector.log_text();
    let busy = progress_lines(&log);
    let line = log
        .lines()
        .find(|l| l.contains("progress: "))
        .unwrap_or_default();
    for part in [
        "rows in",
        "transactions read",
        "batches durable",
        "flushed ",
        "behind the server's current WAL position",
        "ago)",
    ] {
        assert!(line.contains(part), "{part:?} missing from {line}");
    }
    std::thread::sleep(Duration::from_millis(3500));
    let log = connector.log_text();
    assert_eq!(
        progress_lines(&log),
        busy,
        "an idle stream logged progress lines:\n{log}"
    );
    assert!(connector.is_running(), "{log}");
    env.assert_rows_equal("users", "users", "id");
}

#[test]
fn progress_line_appears_during_a_workload_and_not_while_idle_tokio() {
    progress_line_during_a_workload_and_none_while_idle(Shell::Tokio);
}

#[test]
fn progress_line_appears_during_a_workload_and_not_while_idle_blocking() {
    progress_line_during_a_workload_and_none_while_idle(Shell::Blocking);
}
