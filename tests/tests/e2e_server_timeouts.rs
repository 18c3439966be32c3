//! End to end: server-side timeouts set low for slotline's role in its database must not
//! end any of its sessions, in both shells.
//!
//! `statement_timeout`, `lock_timeout`, `idle_in_transaction_session_timeout`,
//! `idle_session_timeout` (and `transaction_timeout` from PostgreSQL 17) are set to 500 ms
//! with `ALTER ROLE ... IN DATABASE ... SET`, the way an operator's defaults reach a
//! connector. The snapshot then needs every kind of connection to outlive them: the
//! replication connection stays in its transaction exporting the snapshot while the workers
//! copy, after waiting seconds (a lock wait) for a transaction that locked the table; each
//! worker's COPY is held back by Feldera's slow completions for longer than 500 ms; the slot
//! monitor idles between samples; and the stream idles for seconds before a few changes
//! arrive. `check` and `status` connect as the same role. The test's own
//! `psql` runs as the superuser, whose sessions keep the defaults.

use serde_json::{json, Value};
use slotline_tests::e2e::{Connector, Env, Shell};
use slotline_tests::feldera_double::{CompletionDelay, DoubleConfig};
use slotline_tests::pg::wait_for;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(240);

/// Rows copied by the snapshot: enough batches that Feldera's pace holds every COPY and
/// the exporting transaction open for many times the timeouts.
const ROWS: u64 = 400_000;

/// What the role's timeouts are set to.
const TIMEOUT: &str = "500ms";

/// Each batch of the copy waits this long for Feldera: with at most a few batches in
/// flight, each worker's COPY range stays open for seconds.
const COMPLETION_DELAY: Duration = Duration::from_millis(300);

/// How long the table is locked against the copy when the connector starts: several times
/// the lock timeout.
const LOCK_HELD: Duration = Duration::from_secs(3);

const SETUP: &str = "CREATE TABLE t (id bigint PRIMARY KEY, v integer);
    CREATE PUBLICATION pub FOR TABLE t;";

fn schema() -> Value {
    let field = |name: &str, ty: &str, nullable: bool| {
        json!({"name": name, "case_sensitive": false,
               "columntype": {"type": ty, "nullable": nullable}})
    };
    json!({"inputs": [
        {"name": "t", "case_sensitive": false, "primary_key": ["id"], "materialized": false,
         "properties": {}, "fields": [field("id", "BIGINT", false), field("v", "INTEGER", true)]}
    ], "outputs": []})
}

/// An environment plus a login role for the connector. The role goes after the
/// environment (its slot and database, which hold the role's settings and grant).
struct WithRole {
    env: Option<Env>,
    name: String,
}

impl WithRole {
    fn env(&self) -> &Env {
        self.env.as_ref().expect("the environment lives until drop")
    }
}

impl Drop for WithRole {
    fn drop(&mut self) {
        let Some(env) = self.env.take() else { return };
        let pg = env.pg;
        drop(env);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pg.psql(
                "postgres",
                &format!("DROP ROLE IF EXISTS \"{}\"", self.name),
            )
        }));
    }
}

/// The timeouts that exist on this server: `transaction_timeout` only from PostgreSQL 17.
fn timeouts(env: &Env) -> Vec<&'static str> {
    let mut names = vec![
        "statement_timeout",
        "lock_timeout",
        "idle_in_transaction_session_timeout",
        "idle_session_timeout",
    ];
    let version: u32 = env
        .sql("SHOW server_version_num")
        .parse()
        .expect("server_version_num is a number");
    if version >= 170_000 {
        names.push("transaction_timeout");
    }
    names
}

/// Creates the connector's role (replication, SELECT on the table) with every timeout
/// set low in this database, and checks a session of that role really gets them.
fn with_low_timeout_role(env: Env) -> WithRole {
    let name = format!("r_{}", env.name);
    env.sql(&format!(
        "CREATE ROLE \"{name}\" LOGIN REPLICATION; GRANT SELECT ON t TO \"{name}\";"
    ));
    let names = timeouts(&env);
    for setting in &names {
        env.sql(&format!(
            "ALTER ROLE \"{name}\" IN DATABASE \"{}\" SET {setting} = '{TIMEOUT}'",
            env.db
        ));
    }
    // A fresh session of the role, as the connector's will be: the settings are applied at
    // connection time.
    let shown = psql_as(
        &env,
        &name,
        &format!(
            "SELECT string_agg(current_setting(n), ',') FROM unnest(ARRAY['{}']) n",
            names.join("','")
        ),
    );
    assert_eq!(
        shown,
        vec![TIMEOUT; names.len()].join(","),
        "the role's sessions do not get the low timeouts"
    );
    WithRole {
        env: Some(env),
        name,
    }
}

/// Runs `sql` through `psql` as `role` (trust authentication) and returns its output.
fn psql_as(env: &Env, role: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            env.pg.host(),
        ])
        .args([
            "-p",
            &env.pg.port().to_string(),
            "-U",
            role,
            "-d",
            &env.db,
            "-c",
            sql,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run psql");
    assert!(
        out.status.success(),
        "psql as {role} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
}

/// The role's URL: the connector connects as it.
fn url_as(env: &Env, role: &str) -> String {
    format!(
        "postgres://{role}@{}:{}/{}",
        env.pg.host(),
        env.pg.port(),
        env.db
    )
}

/// Holds an ACCESS EXCLUSIVE lock on `t` for [`LOCK_HELD`] from a superuser session of its
/// own, so the connector waits for it when it starts.
fn lock_table_for_a_while(env: &Env) -> std::thread::JoinHandle<()> {
    let (pg, db) = (env.pg, env.db.clone());
    let sql = format!(
        "BEGIN; LOCK TABLE t IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep({}); COMMIT;",
        LOCK_HELD.as_secs_f64()
    );
    let thread = std::thread::spawn(move || {
        pg.psql(&db, &sql);
    });
    let granted = wait_for(Duration::from_secs(30), || {
        let held = env.sql(
            "SELECT count(*) FROM pg_locks WHERE relation = 't'::regclass AND mode = 'AccessExclusiveLock' AND granted",
        );
        (held == "1").then_some(())
    });
    assert!(granted.is_some(), "the lock was never taken");
    thread
}

/// Waits until a session of `role` waits for a lock. Taking an ACCESS EXCLUSIVE lock gives
/// the holder a transaction id, so the first to wait is the slot's creation (its snapshot
/// waits for running transactions, a lock wait on their ids), before any worker.
fn wait_role_blocked(env: &Env, role: &str) -> bool {
    wait_for(LOCK_HELD, || {
        let waiting = env.sql(&format!(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) \
             WHERE NOT l.granted AND a.usename = '{role}'"
        ));
        (waiting != "0").then_some(())
    })
    .is_some()
}

/// Lines of the server log saying a session or statement was ended by a timeout.
fn timeout_kills(env: &Env) -> Vec<String> {
    env.pg
        .server_log()
        .lines()
        .filter(|l| l.contains("due to") && l.contains("timeout"))
        .map(str::to_owned)
        .collect()
}

/// Waits for the snapshot to complete, failing at once when a session ends (a kill shows
/// as a retry long before any deadline) or the connector exits.
fn wait_complete_without_retry(env: &Env, connector: &mut Connector) {
    let deadline = Instant::now() + LONG;
    let why = loop {
        if connector.log_text().contains("reconnecting in") {
            break "a session ended and was retried".to_owned();
        }
        if let Some(code) = connector.wait_exit(Duration::ZERO) {
            break format!("the connector exited with {code}");
        }
        if env.state_phase().as_deref() == Some("complete") {
            return;
        }
        if Instant::now() >= deadline {
            break format!("the snapshot did not complete in {LONG:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    panic!(
        "{why}; server timeouts seen: {:#?}\n{}",
        timeout_kills(env),
        connector.log_text()
    );
}

/// Runs `slotline <args>` (or the blocking twin) with `pairs`; returns its exit code and
/// output.
fn operation(shell: Shell, pairs: &[(String, String)], args: &[&str]) -> (Option<i32>, String) {
    let mut command = Command::new(shell.binary());
    command.env_clear();
    command.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    command.envs(pairs.iter().map(|(k, v)| (k, v)));
    let out = command
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run the operation");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

fn sessions_outlive_low_server_timeouts(shell: Shell) {
    let env = Env::with_double(
        "timeouts",
        SETUP,
        DoubleConfig::new("p", schema())
            .with_completion_delay(CompletionDelay::Fixed(COMPLETION_DELAY)),
    );
    env.sql(&format!(
        "INSERT INTO t SELECT g, (g % 1000)::int FROM generate_series(1, {ROWS}) g; ANALYZE t;"
    ));
    let with_role = with_low_timeout_role(env);
    let env = with_role.env();
    let url = url_as(env, &with_role.name);
    let config = env.config(&[
        ("PG_URL", url.as_str()),
        ("TABLES", "t"),
        ("SNAPSHOT_MODE", "initial"),
        ("SNAPSHOT_WORKERS", "2"),
        // Sampled less often than the idle timeout: the monitor's connection idles.
        ("SLOT_CHECK_INTERVAL_MS", "1500"),
    ]);

    let (code, out) = operation(shell, &config, &["check"]);
    assert_eq!(code, Some(0), "check as the role:\n{out}");

    let locker = lock_table_for_a_while(env);
    let started = Instant::now();
    let mut connector = Connector::spawn(shell, &config, &env.name);
    assert!(
        wait_role_blocked(env, &with_role.name),
        "the connector never waited for the table's lock:\n{}",
        connector.log_text()
    );
    let blocked = Instant::now();
    locker.join().expect("the locking session failed");
    let waited = blocked.elapsed();
    assert!(
        waited > Duration::from_secs(1),
        "the connector waited for the lock only {waited:?}, not several times the lock timeout"
    );
    wait_complete_without_retry(env, &mut connector);
    eprintln!("{shell:?}: {ROWS} rows copied in {:?}", started.elapsed());
    env.feldera
        .set_completion_delay(CompletionDelay::Fixed(Duration::ZERO));
    assert!(
        env.wait_caught_up(LONG),
        "the stream did not catch up:\n{}",
        connector.log_text()
    );

    // Every connection idles for several times the timeouts, then changes arrive.
    std::thread::sleep(Duration::from_secs(3));
    env.sql(&format!(
        "INSERT INTO t VALUES ({}, 7); UPDATE t SET v = -1 WHERE id = 17; DELETE FROM t WHERE id = 42;",
        ROWS + 1
    ));
    assert!(
        env.wait_caught_up(LONG),
        "the changes after the idle time were not streamed:\n{}",
        connector.log_text()
    );
    let streamed = Instant::now();
    env.assert_rows_equal("t", "t", "id");
    eprintln!("{shell:?}: the oracle took {:?}", streamed.elapsed());

    let (code, out) = operation(shell, &config, &["status"]);
    assert_eq!(code, Some(0), "status as the role:\n{out}");
    assert!(connector.is_running(), "{}", connector.log_text());
    let log = connector.log_text();
    assert!(
        !log.contains("reconnecting in"),
        "a session ended and was retried:\n{log}"
    );
    // The cluster serves only this file's tests, whose other sessions keep the defaults:
    // any such line is a session of a connector.
    let kills = timeout_kills(env);
    assert!(
        kills.is_empty(),
        "the server ended sessions or statements by a timeout: {kills:#?}"
    );
    assert_eq!(
        connector.stop(Duration::from_secs(30)),
        Some(0),
        "{}",
        connector.log_text()
    );
}

mod sessions_outlive_low_server_timeouts {
    use super::*;

    #[test]
    fn tokio() {
        sessions_outlive_low_server_timeouts(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        sessions_outlive_low_server_timeouts(Shell::Blocking);
    }
}
