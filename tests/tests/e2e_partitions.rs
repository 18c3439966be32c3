//! End to end: a range-partitioned table (a partition whose columns are in another order
//! and had one dropped, a hash-partitioned partition, a DEFAULT partition) routed by its own
//! name, against a real PostgreSQL and the Feldera double, in both shells and under both
//! settings of the publication's `publish_via_partition_root`.
//!
//! - The initial copy reads the table through its leaves, then inserts into every
//!   partition, updates in place, deletes and updates that move rows across partitions are
//!   streamed; Feldera ends equal to PostgreSQL, with no session restarted.
//! - ATTACH PARTITION while streaming: rows written through the new partition arrive (with
//!   `false` after the next session read the catalog again); the rows the table held
//!   before it was attached do not (no change of them is in the WAL). DETACH PARTITION:
//!   Feldera keeps the detached rows, and writes to the detached table do not arrive. A
//!   TRUNCATE of the partitioned table then empties Feldera's table.
//! - A TRUNCATE of one partition: with `false` it stops the stream (exit 1, nothing of its
//!   transaction acknowledged) and a new copy repairs it; with `true` PostgreSQL publishes
//!   nothing, and Feldera keeps the partition's rows.
//!
//! See docs/guide/tables-and-copies.md, "Partitioned tables".

use serde_json::{json, Value};
use slotline_tests::e2e::{Connector, Env, Shell};
use std::process::{Command, Stdio};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(120);

fn schema() -> Value {
    let field = |name: &str, ty: &str, nullable: bool| json!({"name": name, "case_sensitive": false, "columntype": {"type": ty, "nullable": nullable, "precision": -1}});
    json!({"inputs": [
        {"name": "metrics", "case_sensitive": false, "primary_key": ["id"], "materialized": false, "properties": {},
         "fields": [field("id", "BIGINT", false), field("ts", "DATE", false), field("v", "VARCHAR", true)]}
    ], "outputs": []})
}

/// metrics by year: 2023 and 2024 (its columns v, ts, id, after a dropped one), 2025 split
/// by hash of id, and a DEFAULT partition; `rows` rows over 2023..2025 and 2030 (default).
fn setup(via_root: bool, rows: u32) -> String {
    format!(
        "CREATE TABLE metrics (id bigint NOT NULL, ts date NOT NULL, v text, PRIMARY KEY (id, ts)) PARTITION BY RANGE (ts);
         CREATE TABLE metrics_2023 PARTITION OF metrics FOR VALUES FROM ('2023-01-01') TO ('2024-01-01');
         CREATE TABLE metrics_2024 (v text, junk int, ts date NOT NULL, id bigint NOT NULL);
         ALTER TABLE metrics_2024 DROP COLUMN junk;
         ALTER TABLE metrics ATTACH PARTITION metrics_2024 FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
         CREATE TABLE metrics_2025 PARTITION OF metrics FOR VALUES FROM ('2025-01-01') TO ('2026-01-01') PARTITION BY HASH (id);
         CREATE TABLE metrics_2025_h0 PARTITION OF metrics_2025 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
         CREATE TABLE metrics_2025_h1 PARTITION OF metrics_2025 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
         CREATE TABLE metrics_rest PARTITION OF metrics DEFAULT;
         INSERT INTO metrics SELECT g,
           CASE WHEN g % 10 = 0 THEN date '2030-01-01' + g % 365 ELSE date '2023-01-01' + (g * 7) % 1096 END,
           'row ' || g FROM generate_series(1, {rows}) g;
         CREATE PUBLICATION pub FOR TABLE metrics WITH (publish_via_partition_root = {via_root});"
    )
}

fn start(env: &Env, shell: Shell) -> Connector {
    let connector = env.start(
        shell,
        &[
            ("TABLES", "metrics"),
            ("SNAPSHOT_MODE", "initial"),
            ("SNAPSHOT_WORKERS", "4"),
        ],
    );
    assert!(
        env.wait_snapshot_complete_and_caught_up(LONG),
        "the initial copy did not finish:\n{}",
        connector.log_text()
    );
    connector
}

fn caught_up(env: &Env, connector: &Connector) {
    assert!(
        env.wait_caught_up(LONG),
        "the connector did not catch up:\n{}",
        connector.log_text()
    );
}

fn stop(connector: &mut Connector) {
    assert_eq!(
        connector.stop(Duration::from_secs(30)),
        Some(0),
        "{}",
        connector.log_text()
    );
}

/// Sessions that ended so the next one reads the catalog again.
fn catalog_rereads(connector: &Connector) -> usize {
    connector
        .log_text()
        .lines()
        .filter(|l| l.contains("reading the catalog again"))
        .count()
}

/// What `slotline check` prints for this environment (plus `extra`), and its exit code.
fn check_with(env: &Env, shell: Shell, extra: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut pairs = vec![("TABLES", "metrics"), ("SNAPSHOT_MODE", "initial")];
    pairs.extend_from_slice(extra);
    let out = Command::new(shell.binary())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.config(&pairs))
        .arg("check")
        .stdin(Stdio::null())
        .output()
        .expect("run slotline check");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code(), format!("{stdout}{stderr}"))
}

/// What `slotline check` prints for this environment (it must exit 0).
fn check(env: &Env, shell: Shell) -> String {
    let (code, out) = check_with(env, shell, &[]);
    assert_eq!(code, Some(0), "{out}");
    out
}

/// PostgreSQL's rows of `query` (a subquery with columns id, ts, v) against Feldera's.
fn assert_feldera_holds(env: &Env, query: &str, what: &str) {
    let pg = env.pg_rows(&format!("({query})"), "id");
    assert_feldera_rows(env, pg, what);
}

fn assert_feldera_rows(env: &Env, mut pg: Vec<Value>, what: &str) {
    pg.sort_by(|a, b| a["id"].to_string().cmp(&b["id"].to_string()));
    let feldera = env.feldera_rows("metrics", "id");
    assert_eq!(
        feldera.len(),
        pg.len(),
        "{what}: Feldera holds {} rows, expected {}",
        feldera.len(),
        pg.len()
    );
    assert!(feldera == pg, "{what}: Feldera's rows differ");
}

/// 60,000 rows copied through the leaves, then changes in every partition and across them.
fn copy_and_stream_every_kind_of_change(shell: Shell, via_root: bool) {
    let env = Env::new("parts_stream", &setup(via_root, 60_000), schema());
    let check = check(&env, shell);
    assert!(
        check.lines().any(|l| l.starts_with("ok   partitions")
            && l.contains(&format!("publish_via_partition_root = {via_root}"))),
        "check explains the setting:\n{check}"
    );
    let mut connector = start(&env, shell);
    let log = connector.log_text();
    assert!(
        log.contains("copying 1 table(s) (through 5 leaf partition(s))"),
        "the copy reads the leaves:\n{log}"
    );
    env.assert_rows_equal("metrics", "metrics", "id");
    env.sql(
        "INSERT INTO metrics VALUES (100001, '2023-06-01', 'new 2023'), (100002, '2024-06-01', 'new 2024'),
           (100003, '2025-06-01', 'new 2025'), (100004, '2025-06-02', 'new 2025'), (100005, '2031-01-01', 'new rest')",
    );
    env.sql("UPDATE metrics SET v = 'updated in place' WHERE id % 1000 = 7");
    env.sql("DELETE FROM metrics WHERE id % 1000 = 13");
    env.sql(
        "BEGIN;
         UPDATE metrics SET ts = ts + 365 WHERE id % 1000 = 21;
         UPDATE metrics SET ts = '2025-03-03', v = 'from rest to 2025' WHERE id = 100005;
         UPDATE metrics SET ts = '2030-02-02', v = 'from 2024 to rest' WHERE id = 100002;
         COMMIT",
    );
    env.sql("UPDATE metrics SET id = id + 200000 WHERE id % 1000 = 33");
    caught_up(&env, &connector);
    env.assert_rows_equal("metrics", "metrics", "id");
    let moved: usize = env
        .sql("SELECT count(*) FROM metrics WHERE v = 'from rest to 2025' AND ts = '2025-03-03'")
        .parse()
        .unwrap_or(0);
    assert_eq!(moved, 1);
    assert_eq!(catalog_rereads(&connector), 0, "{}", connector.log_text());
    stop(&mut connector);
}

/// ATTACH and DETACH while streaming, then a TRUNCATE of the partitioned table.
fn attach_and_detach_while_streaming(shell: Shell, via_root: bool) {
    let env = Env::new("parts_attach", &setup(via_root, 300), schema());
    let mut connector = start(&env, shell);
    env.sql(
        "CREATE TABLE metrics_2026 (LIKE metrics INCLUDING ALL);
         INSERT INTO metrics_2026 VALUES (9001, '2026-01-05', 'before attach'), (9002, '2026-01-06', 'before attach');
         ALTER TABLE metrics ATTACH PARTITION metrics_2026 FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');",
    );
    env.sql(
        "INSERT INTO metrics VALUES (9003, '2026-02-01', 'through the attached partition'), (9004, '2024-02-01', 'elsewhere')",
    );
    caught_up(&env, &connector);
    assert_feldera_holds(
        &env,
        "SELECT * FROM metrics WHERE id NOT IN (9001, 9002)",
        "after ATTACH: every row but those the attached table held before",
    );
    let rereads = catalog_rereads(&connector);
    assert_eq!(rereads, usize::from(!via_root), "{}", connector.log_text());

    env.sql("ALTER TABLE metrics DETACH PARTITION metrics_2023");
    env.sql("INSERT INTO metrics_2023 VALUES (9005, '2023-05-05', 'into the detached table')");
    env.sql("INSERT INTO metrics VALUES (9006, '2025-05-05', 'after detach')");
    caught_up(&env, &connector);
    assert_feldera_holds(
        &env,
        "SELECT * FROM metrics WHERE id NOT IN (9001, 9002) UNION ALL SELECT id, ts, v FROM metrics_2023 WHERE id <> 9005",
        "after DETACH: Feldera keeps the detached rows, and writes to the detached table do not arrive",
    );

    env.sql("BEGIN; TRUNCATE metrics; INSERT INTO metrics VALUES (9100, '2024-01-02', 'after truncate'); COMMIT");
    caught_up(&env, &connector);
    env.assert_rows_equal("metrics", "metrics", "id");
    assert_eq!(env.feldera_count("metrics"), 1);
    // With `false` the TRUNCATE lists the partitions of the table as it is now, without
    // metrics_2023: against the session's catalog, read before the DETACH, that looks like
    // a TRUNCATE of some partitions, and one more session reads the catalog again.
    assert_eq!(
        catalog_rereads(&connector),
        rereads + usize::from(!via_root),
        "{}",
        connector.log_text()
    );
    stop(&mut connector);
}

/// A TRUNCATE of one partition.
fn truncate_of_one_partition(shell: Shell, via_root: bool) {
    let env = Env::new("parts_trunc", &setup(via_root, 300), schema());
    let mut connector = start(&env, shell);
    let partition = env.pg_rows("metrics_2024", "id");
    assert!(!partition.is_empty());
    env.sql("TRUNCATE metrics_2024");
    let after_truncate = env.wal_lsn();
    env.sql("INSERT INTO metrics VALUES (9200, '2025-02-02', 'after the truncate')");
    if via_root {
        // PostgreSQL publishes no TRUNCATE of a partition when it publishes via the root:
        // the stream goes on and Feldera keeps the partition's rows.
        caught_up(&env, &connector);
        let mut expected = env.pg_rows("metrics", "id");
        expected.extend(partition);
        assert_feldera_rows(
            &env,
            expected,
            "Feldera keeps the truncated partition's rows",
        );
        stop(&mut connector);
        return;
    }
    assert_eq!(
        connector.wait_exit(LONG),
        Some(1),
        "{}",
        connector.log_text()
    );
    let log = connector.log_text();
    assert!(
        log.contains("of partition(s) public.metrics_2024 of public.metrics leaves partition(s)")
            && log.contains("delete its state file"),
        "the exit names the TRUNCATE and the way out:\n{log}"
    );
    assert_eq!(catalog_rereads(&connector), 1, "{log}");
    let confirmed = env.slot_confirmed().expect("the slot");
    assert!(
        !env.lsn_at_least(&confirmed, &after_truncate),
        "the slot ({confirmed}) passed the refused TRUNCATE (committed before {after_truncate})"
    );
    // The way out the message names: a new copy.
    std::fs::remove_file(env.state_path()).expect("remove the state file");
    let mut connector = start(&env, shell);
    env.assert_rows_equal("metrics", "metrics", "id");
    stop(&mut connector);
}

/// A role that may SELECT the partitioned table but not its partitions: `check` names them,
/// and a copy, which reads each partition, exits 1 naming the one it could not read.
fn the_copy_needs_select_on_every_partition(shell: Shell) {
    let env = Env::new("parts_grant", &setup(false, 300), schema());
    let role = format!("ro_{}", env.name);
    env.sql(&format!(
        "CREATE ROLE {role} LOGIN REPLICATION; GRANT SELECT ON metrics TO {role};"
    ));
    let url = format!("postgres://{role}@127.0.0.1:{}/{}", env.pg.port(), env.db);
    let (code, out) = check_with(&env, shell, &[("PG_URL", &url)]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("FAIL select public.metrics")
            && l.contains("but not its partition(s) public.metrics_2023, public.metrics_2024, public.metrics_2025_h0, public.metrics_2025_h1, public.metrics_rest")),
        "{out}"
    );
    let mut connector = env.start(
        shell,
        &[
            ("TABLES", "metrics"),
            ("SNAPSHOT_MODE", "initial"),
            ("PG_URL", &url),
        ],
    );
    assert_eq!(
        connector.wait_exit(LONG),
        Some(1),
        "{}",
        connector.log_text()
    );
    let log = connector.log_text();
    assert!(
        log.contains("(a partition of public.metrics)")
            && log.contains("GRANT SELECT ON public.metrics_"),
        "{log}"
    );
    env.sql(&format!(
        "GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}"
    ));
    let mut connector = env.start(
        shell,
        &[
            ("TABLES", "metrics"),
            ("SNAPSHOT_MODE", "initial"),
            ("PG_URL", &url),
        ],
    );
    assert!(
        env.wait_snapshot_complete_and_caught_up(LONG),
        "{}",
        connector.log_text()
    );
    env.assert_rows_equal("metrics", "metrics", "id");
    stop(&mut connector);
}

/// `publish_via_partition_root = false`: while slotline is stopped, a year is deleted
/// through the root and its partition detached and dropped. The slot still holds those
/// deletes, under the dropped leaf's OID, which no catalog has any more: the state file
/// recorded the leaf when the first run streamed, so the restart places them on metrics,
/// delivers and acknowledges them.
fn a_partition_detached_and_dropped_while_stopped(shell: Shell) {
    let env = Env::new("parts_dropped", &setup(false, 3000), schema());
    let mut connector = start(&env, shell);
    stop(&mut connector);
    let leaves = env.state().expect("a state file")["routes"][0]["leaves"].clone();
    assert!(
        leaves
            .as_array()
            .is_some_and(|l| l.iter().any(|leaf| leaf["name"] == "metrics_2024")),
        "the state file records every leaf: {leaves}"
    );
    let before = env.slot_confirmed().expect("the slot");
    env.sql("DELETE FROM metrics WHERE ts >= '2024-01-01' AND ts < '2025-01-01'");
    env.sql("ALTER TABLE metrics DETACH PARTITION metrics_2024; DROP TABLE metrics_2024");
    env.sql("INSERT INTO metrics VALUES (9001, '2025-05-05', 'after the drop')");
    let mut connector = env.start(
        shell,
        &[("TABLES", "metrics"), ("SNAPSHOT_MODE", "initial")],
    );
    // The slot confirms the current WAL position: past the deletes.
    caught_up(&env, &connector);
    assert!(connector.is_running(), "{}", connector.log_text());
    env.assert_rows_equal("metrics", "metrics", "id");
    assert_ne!(
        env.slot_confirmed(),
        Some(before),
        "the slot moved past the deletes"
    );
    stop(&mut connector);
}

fn copy_and_stream_publishing_partitions(shell: Shell) {
    copy_and_stream_every_kind_of_change(shell, false);
}

fn copy_and_stream_publishing_via_the_root(shell: Shell) {
    copy_and_stream_every_kind_of_change(shell, true);
}

fn attach_and_detach_publishing_partitions(shell: Shell) {
    attach_and_detach_while_streaming(shell, false);
}

fn attach_and_detach_publishing_via_the_root(shell: Shell) {
    attach_and_detach_while_streaming(shell, true);
}

fn truncate_of_a_partition_published_by_itself_stops_the_stream(shell: Shell) {
    truncate_of_one_partition(shell, false);
}

fn truncate_of_a_partition_published_via_the_root_is_not_in_the_stream(shell: Shell) {
    truncate_of_one_partition(shell, true);
}

slotline_tests::both_shells!(
    copy_and_stream_publishing_partitions,
    copy_and_stream_publishing_via_the_root,
    attach_and_detach_publishing_partitions,
    attach_and_detach_publishing_via_the_root,
    truncate_of_a_partition_published_by_itself_stops_the_stream,
    truncate_of_a_partition_published_via_the_root_is_not_in_the_stream,
    the_copy_needs_select_on_every_partition,
    a_partition_detached_and_dropped_while_stopped,
);
