//! End to end: a slot PostgreSQL invalidates while slotline streams.
//!
//! A cluster with `max_slot_wal_keep_size = 1MB`, a Feldera that never completes (so the
//! slot never moves), and WAL written elsewhere until a checkpoint invalidates the slot.
//! slotline exits 1 naming the action (re-snapshot) and leaves the lost slot as it is;
//! `status` and `check` say so; a stream-only start refuses; a start with
//! `SNAPSHOT_MODE=initial` copies again (the startup plan's rule for a slot lost before the
//! process started) and Feldera ends up equal to PostgreSQL.

use serde_json::json;
use slotline_tests::e2e::{Env, Shell};
use slotline_tests::feldera_double::{CompletionDelay, DoubleConfig, FelderaDouble};
use slotline_tests::pg::{wait_for, ClusterOptions, PgCluster};
use std::process::{Command, Stdio};
use std::time::Duration;

fn cluster() -> &'static PgCluster {
    static CLUSTER: std::sync::OnceLock<PgCluster> = std::sync::OnceLock::new();
    CLUSTER.get_or_init(|| {
        PgCluster::start_with(
            ClusterOptions::default()
                .setting("max_slot_wal_keep_size", "1MB")
                .setting("max_replication_slots", "10")
                .setting("max_wal_senders", "10"),
        )
    })
}

fn env(shell: Shell) -> Env {
    let pg = cluster();
    let name = format!(
        "lost_{}_{}",
        shell.binary_name().replace('-', "_"),
        std::process::id()
    );
    let db = pg.create_database(&name);
    pg.psql(
        &db,
        "CREATE TABLE users (id bigint PRIMARY KEY, name text);
         CREATE TABLE filler (n int);
         CREATE PUBLICATION pub FOR TABLE users;",
    );
    let schema = json!({"inputs": [{"name": "users", "case_sensitive": false, "materialized": false,
        "properties": {}, "primary_key": ["id"],
        "fields": [{"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
                   {"name": "name", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": true}}]}],
        "outputs": []});
    let feldera = FelderaDouble::start(
        DoubleConfig::new("p", schema).with_completion_delay(CompletionDelay::Never),
    )
    .expect("double");
    let state_dir = std::env::temp_dir().join(format!("slotline-state-{name}"));
    Env {
        pg,
        db,
        feldera,
        name,
        state_dir,
    }
}

fn wal_status(env: &Env) -> String {
    env.sql(&format!(
        "SELECT wal_status FROM pg_replication_slots WHERE slot_name = '{}'",
        env.slot_name()
    ))
}

fn operation(
    shell: Shell,
    env: &Env,
    extra: &[(&str, &str)],
    args: &[&str],
) -> (Option<i32>, String) {
    let mut command = Command::new(shell.binary());
    command.env_clear();
    command.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (k, v) in env.config(&[&[("TABLES", "users")], extra].concat()) {
        command.env(k, v);
    }
    let out = command
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run");
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn a_slot_lost_while_streaming_exits_1_and_a_snapshot_repairs_it(shell: Shell) {
    let env = env(shell);
    let extra = [
        ("TABLES", "users"),
        ("SLOT_CHECK_INTERVAL_MS", "200"),
        ("BATCH_LINGER_MS", "0"),
        ("NO_PROGRESS_TIMEOUT_SECS", "300"),
    ];
    let mut connector = env.start(shell, &extra);
    assert!(
        connector.wait_log("streaming from slot", Duration::from_secs(60)),
        "{}",
        connector.log_text()
    );
    env.sql("INSERT INTO users VALUES (1, 'pinned')");
    // WAL elsewhere, segment after segment, until a checkpoint invalidates the slot.
    let lost = wait_for(Duration::from_secs(60), || {
        env.sql("INSERT INTO filler SELECT generate_series(1, 1000)");
        env.sql("SELECT pg_switch_wal()");
        env.sql("CHECKPOINT");
        (wal_status(&env) == "lost").then_some(())
    });
    assert!(
        lost.is_some(),
        "the slot was never invalidated: {}",
        wal_status(&env)
    );
    let exit = connector.wait_exit(Duration::from_secs(60));
    let log = connector.log_text();
    assert_eq!(exit, Some(1), "{log}");
    assert!(log.contains("was invalidated while slotline ran"), "{log}");
    assert!(log.contains("SNAPSHOT_MODE=initial"), "{log}");
    assert_eq!(
        wal_status(&env),
        "lost",
        "the lost slot is left as it is, never recreated"
    );

    let (code, out) = operation(shell, &env, &[], &["status"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("FAIL slot") && out.contains("invalidated"),
        "{out}"
    );
    let (code, out) = operation(shell, &env, &[], &["check"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("FAIL start") && l.contains("wal_status = lost")),
        "{out}"
    );

    let mut stream_only = env.start(shell, &extra);
    assert_eq!(stream_only.wait_exit(Duration::from_secs(60)), Some(1));
    assert!(
        stream_only
            .log_text()
            .contains("was invalidated (wal_status = lost)"),
        "{}",
        stream_only.log_text()
    );

    env.feldera
        .set_completion_delay(CompletionDelay::Fixed(Duration::ZERO));
    env.feldera.release_completions();
    env.sql("INSERT INTO users VALUES (2, 'after')");
    let mut repaired = env.start(
        shell,
        &[&extra[..], &[("SNAPSHOT_MODE", "initial")]].concat(),
    );
    assert!(
        repaired.wait_log("streaming from slot", Duration::from_secs(60)),
        "{}",
        repaired.log_text()
    );
    assert_eq!(wal_status(&env), "reserved", "a new slot");
    env.assert_rows_equal("users", "users", "id");
    assert_eq!(repaired.stop(Duration::from_secs(30)), Some(0));
}

#[test]
fn tokio_shell() {
    a_slot_lost_while_streaming_exits_1_and_a_snapshot_repairs_it(Shell::Tokio);
}

#[test]
fn blocking_shell() {
    a_slot_lost_while_streaming_exits_1_and_a_snapshot_repairs_it(Shell::Blocking);
}
