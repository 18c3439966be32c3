//! The throwaway-PostgreSQL harness itself: it starts a logical-decoding-capable server,
//! refuses clearly when binaries are missing, and leaves nothing behind.

use slotline_tests::pg::{search_pg_bin, ClusterOptions, PgCluster};
use std::path::Path;

#[test]
fn cluster_runs_with_logical_wal_and_answers_sql() {
    let pg = PgCluster::start_with(ClusterOptions::default().setting("wal_sender_timeout", "4s"));
    assert_eq!(pg.psql("postgres", "SHOW wal_level"), "logical");
    assert_eq!(pg.psql("postgres", "SHOW wal_sender_timeout"), "4s");
    let db = pg.create_database("harness_db");
    pg.psql(
        &db,
        "CREATE TABLE t (id int primary key); INSERT INTO t VALUES (1), (2)",
    );
    assert_eq!(pg.psql(&db, "SELECT count(*) FROM t"), "2");
}

#[test]
fn dropping_the_cluster_stops_the_server_and_removes_its_directory() {
    let pg = PgCluster::start();
    let data = pg.data_dir();
    let pid_file = std::fs::read_to_string(data.join("postmaster.pid"))
        .expect("running server has a pid file");
    let pid: u32 = pid_file.lines().next().unwrap().trim().parse().unwrap();
    assert!(is_alive(pid));
    drop(pg);
    assert!(
        !data.exists(),
        "cluster directory {} left behind",
        data.display()
    );
    assert!(!is_alive(pid), "postmaster {pid} still running");
}

/// Alive = present and not a zombie (an orphaned postmaster is re-parented to an init that
/// may not reap it promptly; a zombie has exited).
fn is_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
        !matches!(state.and_then(|s| s.chars().next()), Some('Z' | 'X'))
    })
}

#[test]
fn restart_keeps_data_and_port() {
    let pg = PgCluster::start();
    pg.psql(
        "postgres",
        "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('x')",
    );
    let port = pg.port();
    pg.restart();
    assert_eq!(pg.port(), port);
    assert_eq!(pg.psql("postgres", "SELECT v FROM kept"), "x");
}

#[test]
fn missing_binaries_fail_with_where_it_looked_and_how_to_fix() {
    let err = search_pg_bin(
        Some("/nonexistent/bin".into()),
        Path::new("/nonexistent/lib/postgresql"),
        "/nonexistent/pg_config",
    )
    .unwrap_err();
    assert!(err.contains("$SLOTLINE_PG_BIN=/nonexistent/bin"), "{err}");
    assert!(err.contains("/nonexistent/lib/postgresql/*/bin"), "{err}");
    assert!(err.contains("apt-get install -y postgresql"), "{err}");
}
