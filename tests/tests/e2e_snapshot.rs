//! End to end: the initial snapshot (`SNAPSHOT_MODE=initial`) against a real PostgreSQL and
//! the Feldera double, both shells. Every test ends with the oracle: Feldera's rows equal
//! PostgreSQL's, value by value, each of weight 1, once the connector caught up.
//!
//! Copy and stream meet at the slot's consistent point: rows committed before it are copied,
//! rows committed after it are streamed. The tests commit while the copy runs (a background
//! writer), crash the copy at its three crash points, delete or corrupt the state file,
//! point the same state directory at another cluster, and start against a Feldera table that
//! already holds rows; `SNAPSHOT_MODE=inconsistent` shows exactly the rows it loses.

use serde_json::{json, Value};
use slotline_tests::e2e::{Connector, Env, Shell, Writer};
use slotline_tests::feldera_double::{CompletionDelay, DoubleConfig};
use slotline_tests::pg::{wait_for, PgCluster};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(180);

/// The retraction of `table` logged its end with exactly `deleted` deletes sent.
fn scan_ended(log: &str, table: &str, deleted: u64) -> bool {
    let start = format!("{table}: scan ended: ");
    let sent = format!(" {deleted} deletes sent,");
    log.lines().any(|l| l.contains(&start) && l.contains(&sent))
}
fn field(name: &str, columntype: Value) -> Value {
    json!({"name": name, "case_sensitive": false, "columntype": columntype})
}

fn bigint() -> Value {
    json!({"type": "BIGINT", "nullable": false})
}

fn int() -> Value {
    json!({"type": "INTEGER", "nullable": true})
}

fn text() -> Value {
    json!({"type": "VARCHAR", "nullable": true, "precision": -1})
}

fn schema() -> Value {
    json!({"inputs": [
        {"name": "users", "case_sensitive": false, "primary_key": ["id"], "materialized": false, "properties": {},
         "fields": [
            field("id", bigint()),
            field("name", text()),
            field("email", text()),
            field("bio", text()),
            field("city", text()),
            field("score", int()),
            field("visits", int()),
            field("active", json!({"type": "BOOLEAN", "nullable": true}))]},
        {"name": "items", "case_sensitive": false, "primary_key": ["sku"], "materialized": false, "properties": {},
         "fields": [
            field("sku", json!({"type": "VARCHAR", "nullable": false, "precision": -1})),
            field("qty", int())]}
    ], "outputs": []})
}

/// A wide-ish `users` table and a narrow `items` table keyed by text.
const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text, email text, bio text,
        city text, score integer, visits integer, active boolean);
    CREATE TABLE items (sku text PRIMARY KEY, qty integer);
    CREATE PUBLICATION pub FOR TABLE users, items;";

const TABLES: &str = "users,items";

/// `users` rows `1..=n` and `items` rows `sku-1..=sku-m`.
fn fill(env: &Env, users: u64, items: u64) {
    env.sql(&format!(
        "INSERT INTO users SELECT g, 'name ' || g, 'user' || g || '@example.com',
            repeat('bio of ' || g || ' ', 4), 'city ' || (g % 97), (g % 1000)::int, 0, g % 3 = 0
         FROM generate_series(1, {users}) g;
         INSERT INTO items SELECT 'sku-' || g, (g % 50)::int FROM generate_series(1, {items}) g;
         ANALYZE users; ANALYZE items;"
    ));
}

/// The n-th transaction of the background writer: inserts a new user and item, updates an
/// existing user and item, deletes a user and an item, and moves an item to a new key, all
/// in one transaction (`users_n`/`items_n`: how many rows the tables started with).
fn mixed_transaction(n: u64, users_n: u64, items_n: u64) -> String {
    let new_id = 1_000_000 + n;
    let updated = (n * 7_919) % users_n + 1;
    let deleted = (n * 104_729 + 13) % users_n + 1;
    let item = (n * 31) % items_n + 1;
    let gone = (n * 53 + 7) % items_n + 1;
    let moved = (n * 97 + 3) % items_n + 1;
    format!(
        "BEGIN;
         INSERT INTO users VALUES ({new_id}, 'new {n}', 'new{n}@example.com', NULL, 'nowhere', {n}, 1, true);
         UPDATE users SET score = score + 1, visits = visits + 1, name = name || '+' WHERE id = {updated};
         DELETE FROM users WHERE id = {deleted};
         INSERT INTO items VALUES ('new-{n}', {n}) ON CONFLICT (sku) DO UPDATE SET qty = excluded.qty;
         UPDATE items SET qty = qty + 100 WHERE sku = 'sku-{item}';
         DELETE FROM items WHERE sku = 'sku-{gone}';
         UPDATE items SET sku = 'moved-{n}' WHERE sku = 'sku-{moved}';
         COMMIT;"
    )
}

fn writer(env: &Env, users_n: u64, items_n: u64) -> Writer {
    Writer::start(env.pg, &env.db, Duration::from_millis(5), move |n| {
        mixed_transaction(n, users_n, items_n)
    })
}

fn start(env: &Env, shell: Shell, extra: &[(&str, &str)]) -> Connector {
    let mut pairs = vec![("TABLES", TABLES), ("SNAPSHOT_MODE", "initial")];
    pairs.extend_from_slice(extra);
    env.start(shell, &pairs)
}

fn assert_equal(env: &Env) {
    env.assert_rows_equal("users", "users", "id");
    env.assert_rows_equal("items", "items", "sku");
}

/// Waits for `complete` and for the stream to catch up with every commit so far, then
/// checks the oracle.
fn converge(env: &Env, connector: &Connector) {
    assert!(
        env.wait_snapshot_complete_and_caught_up(LONG),
        "the connector did not finish the snapshot and catch up (state {:?}):\n{}",
        env.state(),
        connector.log_text()
    );
    assert_equal(env);
    assert_one_session(connector);
}

/// Nothing in these runs is a reason to end a session: a retry would hide a failure.
fn assert_one_session(connector: &Connector) {
    let log = connector.log_text();
    assert!(
        !log.contains("reconnecting in"),
        "a session ended and was retried:\n{log}"
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

fn assert_complete_for(env: &Env, consistent_point: &str) {
    let state = env.state().expect("a state file");
    assert_eq!(state["phase"], "complete", "{state}");
    assert_eq!(state["consistent_point"], consistent_point, "{state}");
    assert_eq!(state["slot"], env.slot_name(), "{state}");
    assert_eq!(state["system_id"], env.system_identifier(), "{state}");
}

/// Waits for the slot to exist and returns its `confirmed_flush_lsn` read while the state
/// file still says `pending`: nothing has been streamed or acknowledged yet, so that is the
/// position the slot was created at, its consistent point.
///
/// A fresh start writes the file only once the slot exists (docs/snapshot.md, "Before
/// anything is created"), so the slot may be seen a moment before the file.
fn consistent_point_while_copying(env: &Env, connector: &Connector) -> String {
    wait_for(LONG, || env.slot_confirmed())
        .unwrap_or_else(|| panic!("the slot was never created:\n{}", connector.log_text()));
    let phase = wait_for(LONG, || env.state_phase());
    assert_eq!(
        phase.as_deref(),
        Some("pending"),
        "the copy had already finished when the state file was first seen; cannot tell its consistent point"
    );
    env.slot_confirmed().expect("the slot exists")
}

// ---- 200,000 rows with a writer committing during the copy ----

fn large_copy_with_concurrent_writer(shell: Shell) {
    let (users_n, items_n) = (150_000, 50_000);
    let env = Env::with_double(
        "snap_large",
        SETUP,
        DoubleConfig::new("p", schema()).with_completion_delay(CompletionDelay::Never),
    );
    fill(&env, users_n, items_n);
    let writer = writer(&env, users_n, items_n);
    let mut connector = start(&env, shell, &[("SNAPSHOT_WORKERS", "4")]);
    let point = consistent_point_while_copying(&env, &connector);
    // Feldera holds every batch of the copy until the writer committed several transactions
    // after the slot's creation: they are the changes the stream must carry.
    let at_slot = writer.committed();
    assert!(
        writer.wait_committed(at_slot + 5, LONG),
        "the writer stalled"
    );
    assert_eq!(env.state_phase().as_deref(), Some("pending"));
    env.feldera
        .set_completion_delay(CompletionDelay::Fixed(Duration::ZERO));
    env.feldera.release_completions();
    assert!(
        wait_for(LONG, || (env.state_phase().as_deref() == Some("complete"))
            .then_some(()))
        .is_some(),
        "the copy never completed:\n{}",
        connector.log_text()
    );
    let committed = writer.stop();
    assert!(committed > at_slot + 5, "{committed} transactions");
    converge(&env, &connector);
    assert_complete_for(&env, &point);
    let log = connector.log_text();
    assert!(
        log.contains(&format!("at {point} (SNAPSHOT 'export')")),
        "the log names another consistent point than the slot's {point}:\n{log}"
    );
    stop(&mut connector);
}

mod large_copy_with_a_concurrent_writer_equals_postgresql {
    use super::*;

    #[test]
    fn tokio() {
        large_copy_with_concurrent_writer(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        large_copy_with_concurrent_writer(Shell::Blocking);
    }
}

// ---- the three crash points ----

const CRASH_USERS: u64 = 20_000;
const CRASH_ITEMS: u64 = 5_000;

/// Crashes the copy at `point` (the `after`-th time it is reached) while a writer commits,
/// keeps writing while the connector is down, restarts without crash variables and checks
/// it converges.
fn crash_then_restart_converges(shell: Shell, point: &str, after: &str) {
    let env = Env::new("snap_crash", SETUP, schema());
    fill(&env, CRASH_USERS, CRASH_ITEMS);
    let writer = writer(&env, CRASH_USERS, CRASH_ITEMS);
    let mut crashing = start(
        &env,
        shell,
        &[
            ("SNAPSHOT_WORKERS", "2"),
            ("BATCH_MAX_ROWS", "1000"),
            ("CRASH_AT", point),
            ("CRASH_AFTER_BATCHES", after),
        ],
    );
    let code = crashing.wait_exit(LONG);
    let log = crashing.log_text();
    assert_eq!(code, Some(70), "{log}");
    assert!(
        log.contains(&format!("crash injected at {point}")),
        "the log does not name the crash point:\n{log}"
    );
    assert_eq!(
        env.state_phase().as_deref(),
        Some("pending"),
        "a crash before complete leaves the state pending"
    );
    assert!(env.slot_exists(), "the slot was created before {point}");
    let copied = env.feldera_count("users") + env.feldera_count("items");
    let total = (CRASH_USERS + CRASH_ITEMS) as usize;
    match point {
        "snapshot_after_slot" => assert_eq!(copied, 0, "nothing is copied before the slot exists"),
        // At least `after` durable batches (each carries rows), and not all of the copy.
        "snapshot_mid_copy" => assert!(
            copied >= after.parse::<usize>().unwrap() && copied < total,
            "{copied} rows in Feldera after a crash mid-copy"
        ),
        // Every row the copy read is durable: the summary line names how many it read.
        _ => assert!(
            log.contains(&format!("snapshot: copied {copied} rows in")),
            "Feldera holds {copied} rows at snapshot_before_complete, not what the copy read:\n{log}"
        ),
    }

    // The writer goes on while the connector is down, then during the new copy.
    let down = writer.committed();
    assert!(writer.wait_committed(down + 3, LONG), "the writer stalled");
    let mut restarted = start(&env, shell, &[("SNAPSHOT_WORKERS", "2")]);
    assert!(
        wait_for(LONG, || (env.state_phase().as_deref() == Some("complete"))
            .then_some(()))
        .is_some(),
        "the restart never completed its copy:\n{}",
        restarted.log_text()
    );
    writer.stop();
    converge(&env, &restarted);
    let log = restarted.log_text();
    assert!(
        log.contains("never finished (pending)"),
        "the restart does not say why it copies again:\n{log}"
    );
    stop(&mut restarted);
}

macro_rules! crash_case {
    ($name:ident, $point:literal, $after:literal) => {
        mod $name {
            use super::*;

            #[test]
            fn tokio() {
                crash_then_restart_converges(Shell::Tokio, $point, $after);
            }

            #[test]
            fn blocking() {
                crash_then_restart_converges(Shell::Blocking, $point, $after);
            }
        }
    };
}

crash_case!(
    crash_after_the_slot_then_restart_converges,
    "snapshot_after_slot",
    "1"
);
crash_case!(
    crash_at_the_5th_durable_batch_then_restart_converges,
    "snapshot_mid_copy",
    "5"
);
crash_case!(
    crash_before_complete_then_restart_converges,
    "snapshot_before_complete",
    "1"
);

// ---- the state file: deleted, corrupt, from another cluster ----

/// A first run copies and streams, then stops: the state file says complete.
fn seeded_and_stopped(env: &Env, shell: Shell) {
    let mut first = start(env, shell, &[]);
    converge(env, &first);
    stop(&mut first);
    assert_eq!(env.state_phase().as_deref(), Some("complete"));
}

fn state_file_deleted_with_the_slot_present(shell: Shell) {
    let env = Env::new("snap_deleted", SETUP, schema());
    fill(&env, 2_000, 500);
    seeded_and_stopped(&env, shell);
    // While slotline is down: rows go from PostgreSQL (Feldera still holds them), and the
    // record of the copy is deleted. The slot would replay these deletes, but without a
    // state file it is no proof of anything: it is dropped and the copy redone.
    env.sql("DELETE FROM users WHERE id <= 50; DELETE FROM items WHERE sku LIKE 'sku-1_';");
    std::fs::remove_file(env.state_path()).expect("delete the state file");
    // The leftover check asks PostgreSQL about 300 keys at a time: seven questions for the
    // 2,000 users.
    let mut restarted = start(&env, shell, &[("RETRACT_PAGE_ROWS", "300")]);
    converge(&env, &restarted);
    let log = restarted.log_text();
    assert!(
        log.contains("exists but") && log.contains("does not"),
        "no warning about the slot without a state file:\n{log}"
    );
    // The ghosts were retracted as leftovers (not replayed from the dropped slot).
    assert!(
        scan_ended(&log, "users", 50),
        "the 50 deleted users were not retracted as leftovers:\n{log}"
    );
    assert!(
        scan_ended(&log, "items", 10),
        "the 10 deleted items were not retracted as leftovers:\n{log}"
    );
    stop(&mut restarted);
}

mod state_file_deleted_with_the_slot_present_resnapshots_without_ghosts {
    use super::*;

    #[test]
    fn tokio() {
        state_file_deleted_with_the_slot_present(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        state_file_deleted_with_the_slot_present(Shell::Blocking);
    }
}

fn corrupt_state_file(shell: Shell) {
    let env = Env::new("snap_corrupt", SETUP, schema());
    fill(&env, 300, 100);
    seeded_and_stopped(&env, shell);
    let corrupt = b"{\"version\": 1, \"phase\": \"compl".to_vec();
    std::fs::write(env.state_path(), &corrupt).expect("corrupt the state file");
    env.sql("INSERT INTO users (id, name) VALUES (5000, 'waits in the slot')");
    let slot_before = env.slot_confirmed().expect("the slot");
    let users_before = env.feldera_rows("users", "id");
    let items_before = env.feldera_rows("items", "sku");
    env.feldera.clear_requests();

    let mut refused = start(&env, shell, &[]);
    let code = refused.wait_exit(LONG);
    let log = refused.log_text();
    assert_eq!(code, Some(1), "{log}");
    let path = env.state_path().display().to_string();
    assert!(
        log.contains(&format!("cannot use state file {path}")),
        "the refusal does not name the state file {path}:\n{log}"
    );
    assert_eq!(
        env.state_bytes(),
        Some(corrupt),
        "the state file was touched"
    );
    assert_eq!(env.slot_confirmed(), Some(slot_before), "the slot moved");
    assert_eq!(env.feldera_rows("users", "id"), users_before);
    assert_eq!(env.feldera_rows("items", "sku"), items_before);
    let sent: Vec<_> = env
        .feldera
        .requests()
        .into_iter()
        .filter(|r| r.endpoint == "ingress")
        .collect();
    assert!(sent.is_empty(), "ingress after a refusal: {sent:?}");
}

mod corrupt_state_file_exits_1_changing_nothing {
    use super::*;

    #[test]
    fn tokio() {
        corrupt_state_file(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        corrupt_state_file(Shell::Blocking);
    }
}

/// The same state directory, database name, tables and Feldera pipeline, but another
/// cluster (a restore, a failover): its system identifier differs, so the copy is redone
/// and whatever Feldera holds from the first cluster that the second lacks is retracted.
fn another_cluster_under_the_same_state_dir(shell: Shell) {
    let env = Env::new("snap_cluster", SETUP, schema());
    fill(&env, 1_000, 200);
    seeded_and_stopped(&env, shell);

    let other = PgCluster::start();
    other.create_database(&env.db);
    other.psql(&env.db, SETUP);
    other.psql(
        &env.db,
        "INSERT INTO users (id, name, score) SELECT g, 'other ' || g, 1 FROM generate_series(500, 1499) g;
         INSERT INTO items SELECT 'sku-' || g, 7 FROM generate_series(150, 249) g;",
    );
    let other_system = other.psql(
        "postgres",
        "SELECT system_identifier FROM pg_control_system()",
    );
    assert_ne!(
        other_system,
        env.system_identifier(),
        "two initdb runs share an identifier"
    );

    let url = other.url(&env.db);
    let mut moved = start(&env, shell, &[("PG_URL", &url)]);
    let complete = wait_for(LONG, || {
        env.state()
            .filter(|s| s["phase"] == "complete" && s["system_id"] == other_system.as_str())
    });
    assert!(
        complete.is_some(),
        "no complete copy of the other cluster:\n{}",
        moved.log_text()
    );
    let caught_up = wait_for(LONG, || {
        let lsn = other.psql("postgres", "SELECT pg_current_wal_lsn()");
        let done = other.psql(
            &env.db,
            &format!(
                "SELECT confirmed_flush_lsn >= '{lsn}'::pg_lsn FROM pg_replication_slots WHERE slot_name = '{}'",
                env.slot_name()
            ),
        );
        (done == "t").then_some(())
    });
    assert!(caught_up.is_some(), "{}", moved.log_text());
    let log = moved.log_text();
    assert!(
        log.contains(&format!(
            "system identifier {} -> {other_system}",
            env.system_identifier()
        )),
        "no warning naming the changed system identifier:\n{log}"
    );
    for (table, key) in [("users", "id"), ("items", "sku")] {
        let mut expected = other_rows(&other, &env.db, table, key);
        expected.sort_by(|a, b| a[key].to_string().cmp(&b[key].to_string()));
        assert_eq!(
            env.feldera_rows(table, key),
            expected,
            "Feldera's {table} (left) differs from the other cluster's (right)"
        );
    }
    stop(&mut moved);
}

fn other_rows(pg: &PgCluster, db: &str, table: &str, key: &str) -> Vec<Value> {
    let out = pg.psql(
        db,
        &format!("SELECT coalesce(json_agg(row_to_json(t) ORDER BY {key}), '[]') FROM {table} t"),
    );
    match serde_json::from_str(&out) {
        Ok(Value::Array(rows)) => rows,
        other => panic!("unexpected rows from {table}: {other:?}"),
    }
}

mod another_cluster_under_the_same_state_dir_resnapshots {
    use super::*;

    #[test]
    fn tokio() {
        another_cluster_under_the_same_state_dir(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        another_cluster_under_the_same_state_dir(Shell::Blocking);
    }
}

// ---- the other modes ----

fn never_writes_no_state(shell: Shell) {
    let env = Env::new("snap_never", SETUP, schema());
    fill(&env, 10, 0);
    let mut connector = env.start(shell, &[("TABLES", TABLES), ("SNAPSHOT_MODE", "never")]);
    assert!(
        wait_for(LONG, || env.slot_exists().then_some(())).is_some(),
        "{}",
        connector.log_text()
    );
    env.sql(
        "INSERT INTO users (id, name) VALUES (100, 'streamed'); INSERT INTO items VALUES ('s', 1);",
    );
    assert!(env.wait_caught_up(LONG), "{}", connector.log_text());
    stop(&mut connector);
    // Only the streamed rows: the 10 pre-existing ones were never copied.
    let users: Vec<Value> = env.feldera_rows("users", "id");
    assert_eq!(users.len(), 1, "{users:?}");
    assert_eq!(users[0]["id"], 100);
    assert_eq!(
        env.state_bytes(),
        None,
        "SNAPSHOT_MODE=never wrote a state file"
    );
    let entries: Vec<_> = std::fs::read_dir(&env.state_dir)
        .map(|dir| dir.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(entries.is_empty(), "files in STATE_DIR: {entries:?}");
}

mod never_mode_writes_no_state_file {
    use super::*;

    #[test]
    fn tokio() {
        never_writes_no_state(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        never_writes_no_state(Shell::Blocking);
    }
}

/// `inconsistent` copies first and creates the slot after the copy is durable. Feldera
/// holds the copy's batch (completion withheld) while transactions commit: the copy has
/// read its rows, the slot does not exist yet, so those transactions are in neither. Once
/// Feldera completes the batch the slot is created and later commits stream normally.
fn inconsistent_loses_the_window(shell: Shell) {
    let env = Env::with_double(
        "snap_inconsistent",
        SETUP,
        DoubleConfig::new("p", schema()).with_completion_delay(CompletionDelay::Never),
    );
    fill(&env, 100, 10);
    let copied_users = env.pg_rows("users", "id");
    let copied_items = env.pg_rows("items", "sku");
    let mut connector = start(&env, shell, &[("SNAPSHOT_MODE", "inconsistent")]);
    // The copy has read the tables once a batch was sent and every copying connection
    // ended its transaction and left (the second batch waits for the first to complete).
    let copiers = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'slotline/{}/copy-%'",
        env.slot_name()
    );
    let read = wait_for(LONG, || {
        (env.ingress_rows() > 0 && env.sql(&copiers) == "0").then_some(())
    });
    assert!(read.is_some(), "{}", connector.log_text());
    assert!(
        !env.slot_exists(),
        "inconsistent creates the slot after the copy"
    );
    // The window: committed after the copy read the tables, before the slot exists.
    env.sql(
        "INSERT INTO users (id, name) VALUES (1001, 'lost insert'), (1002, 'lost insert');
         UPDATE users SET name = 'lost update' WHERE id <= 5;
         DELETE FROM users WHERE id BETWEEN 6 AND 10;
         INSERT INTO items VALUES ('lost', 1);",
    );
    env.feldera
        .set_completion_delay(CompletionDelay::Fixed(Duration::ZERO));
    env.feldera.release_completions();
    assert!(
        wait_for(LONG, || (env.state_phase().as_deref() == Some("complete"))
            .then_some(()))
        .is_some(),
        "{}",
        connector.log_text()
    );
    // After the slot: streamed as usual.
    env.sql("INSERT INTO users (id, name) VALUES (2001, 'streamed'); UPDATE users SET name = 'streamed update' WHERE id = 50;");
    assert!(env.wait_caught_up(LONG), "{}", connector.log_text());
    stop(&mut connector);

    // Feldera holds the copy plus the streamed changes, and exactly nothing of the window.
    let mut expected_users = copied_users;
    for row in &mut expected_users {
        if row["id"] == 50 {
            row["name"] = json!("streamed update");
        }
    }
    let mut streamed = expected_users[0].clone();
    for (_, value) in streamed.as_object_mut().unwrap().iter_mut() {
        *value = Value::Null;
    }
    streamed["id"] = json!(2001);
    streamed["name"] = json!("streamed");
    expected_users.push(streamed);
    expected_users.sort_by(|a, b| a["id"].to_string().cmp(&b["id"].to_string()));
    assert_eq!(env.feldera_rows("users", "id"), expected_users);
    let mut expected_items = copied_items;
    expected_items.sort_by(|a, b| a["sku"].to_string().cmp(&b["sku"].to_string()));
    assert_eq!(env.feldera_rows("items", "sku"), expected_items);
    // And PostgreSQL differs from Feldera by exactly the window's changes.
    assert_eq!(
        env.sql("SELECT count(*) FROM users WHERE id IN (1001, 1002)"),
        "2"
    );
    assert_eq!(
        env.sql("SELECT count(*) FROM users WHERE name = 'lost update'"),
        "5"
    );
    assert_eq!(
        env.sql("SELECT count(*) FROM users WHERE id BETWEEN 6 AND 10"),
        "0"
    );
    let log = connector.log_text();
    assert!(
        log.contains("SNAPSHOT_MODE=inconsistent"),
        "no warning about the mode's loss:\n{log}"
    );
}

mod inconsistent_mode_loses_exactly_what_commits_between_copy_and_slot {
    use super::*;

    #[test]
    fn tokio() {
        inconsistent_loses_the_window(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        inconsistent_loses_the_window(Shell::Blocking);
    }
}

// ---- a fresh start against a Feldera table that already holds rows ----

fn fresh_start_against_a_non_empty_feldera(shell: Shell) {
    let env = Env::new("snap_nonempty", SETUP, schema());
    fill(&env, 500, 50);
    // Feldera already holds ghosts (keys PostgreSQL lacks) and a stale version of a row.
    let ghosts: Vec<Value> = (9_001..=9_030)
        .map(|id| json!({"id": id, "name": "ghost"}))
        .chain([json!({"id": 7, "name": "stale"})])
        .collect();
    env.ingest("users", &ghosts);
    env.ingest("items", &[json!({"sku": "ghost", "qty": 1})]);
    assert!(
        wait_for(LONG, || (env.feldera_count("users") == 31).then_some(())).is_some(),
        "the double did not process the seeded rows"
    );
    assert!(
        !env.slot_exists() && env.state_bytes().is_none(),
        "a fresh start"
    );

    let mut connector = start(&env, shell, &[]);
    converge(&env, &connector);
    let log = connector.log_text();
    assert!(
        log.contains("Feldera table users already holds 31 rows before the initial copy")
            && log.contains("Feldera table items already holds 1 rows before the initial copy"),
        "the connector did not notice the rows Feldera held:\n{log}"
    );
    assert!(
        scan_ended(&log, "users", 30),
        "the 30 ghosts were not retracted:\n{log}"
    );
    assert!(
        log.contains("users: Feldera holds exactly the 500 rows copied"),
        "no count check after the retraction:\n{log}"
    );
    stop(&mut connector);

    // A restart with the state complete and the slot present streams: nothing is copied.
    env.sql("INSERT INTO users (id, name) VALUES (501, 'while down'); DELETE FROM items WHERE sku = 'sku-1';");
    let mut restarted = start(&env, shell, &[]);
    assert!(env.wait_caught_up(LONG), "{}", restarted.log_text());
    assert_equal(&env);
    assert_one_session(&restarted);
    let log = restarted.log_text();
    assert!(
        log.contains("plan: stream from the slot") && !log.contains("copying"),
        "a restart after a complete copy copied again:\n{log}"
    );
    stop(&mut restarted);
}

mod fresh_start_retracts_what_a_non_empty_feldera_holds_and_postgresql_lacks {
    use super::*;

    #[test]
    fn tokio() {
        fresh_start_against_a_non_empty_feldera(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        fresh_start_against_a_non_empty_feldera(Shell::Blocking);
    }
}

// ---- names that need quoting, keys that need escaping ----

fn quoted_schema() -> Value {
    let cs = |name: &str, columntype: Value| json!({"name": name, "case_sensitive": true, "columntype": columntype});
    json!({"inputs": [
        {"name": "OrderItems", "case_sensitive": true, "primary_key": ["SKU"], "materialized": false, "properties": {},
         "fields": [
            cs("SKU", json!({"type": "VARCHAR", "nullable": false, "precision": -1})),
            cs("Qty", int()),
            field("select", text())]}
    ], "outputs": []})
}

const QUOTED_SETUP: &str = "CREATE SCHEMA \"Sales\";
    CREATE TABLE \"Sales\".\"Order Items\" (\"SKU\" text PRIMARY KEY, \"Qty\" integer, \"select\" text);
    CREATE PUBLICATION pub FOR TABLE \"Sales\".\"Order Items\";";

const QUOTED_TABLE: &str = "\"Sales\".\"Order Items\"";

fn assert_quoted_equal(env: &Env) {
    let mut pg = env.pg_rows(QUOTED_TABLE, "\"SKU\"");
    pg.sort_by(|a, b| a["SKU"].to_string().cmp(&b["SKU"].to_string()));
    assert_eq!(
        env.feldera_rows("OrderItems", "SKU"),
        pg,
        "Feldera's OrderItems (left) differs from PostgreSQL (right)"
    );
}

/// A table in a mixed-case schema, with a space in its name, mixed-case and reserved column
/// names, routed to a case-sensitive Feldera table, and keys holding quotes, backslashes,
/// tabs, newlines and non-ASCII text: copied, its leftovers found in PostgreSQL by equality
/// and retracted over several pages, then truncated.
fn quoted_names_and_hostile_keys(shell: Shell) {
    let env = Env::new("snap_quoted", QUOTED_SETUP, quoted_schema());
    env.sql(&format!(
        "INSERT INTO {QUOTED_TABLE} SELECT 'sku ' || g, g, 'sel' FROM generate_series(1, 700) g;
         INSERT INTO {QUOTED_TABLE} VALUES
           ('o''brien', 1, 'quote'), (E'back\\\\slash', 2, NULL), (E'tab\\there', 3, NULL),
           (E'new\\nline', 4, NULL), ('ünï☃', 5, NULL), ('', 6, 'empty key'),
           ('%_like', 7, NULL), (' padded ', 8, NULL);"
    ));
    let routes = format!("{QUOTED_TABLE}:\"OrderItems\"");
    let config = [
        ("TABLES", routes.as_str()),
        ("SNAPSHOT_MODE", "initial"),
        ("RETRACT_PAGE_ROWS", "100"),
    ];
    let mut first = env.start(shell, &config);
    assert!(
        env.wait_snapshot_complete_and_caught_up(LONG),
        "{}",
        first.log_text()
    );
    assert_quoted_equal(&env);
    stop(&mut first);

    // Half the hostile keys and every third plain one go while slotline is down; the
    // state file goes too, so the restart copies again and retracts them as leftovers.
    env.sql(&format!(
        "DELETE FROM {QUOTED_TABLE} WHERE \"Qty\" % 3 = 0 AND \"SKU\" LIKE 'sku %';
         DELETE FROM {QUOTED_TABLE} WHERE \"SKU\" IN ('o''brien', E'tab\\there', '', ' padded ');"
    ));
    std::fs::remove_file(env.state_path()).expect("delete the state file");
    let mut again = env.start(shell, &config);
    assert!(
        env.wait_snapshot_complete_and_caught_up(LONG),
        "{}",
        again.log_text()
    );
    assert_quoted_equal(&env);
    assert_one_session(&again);
    let log = again.log_text();
    assert!(
        log.lines()
            .any(|l| l.contains(": scan ended: ") && l.contains(" 237 deletes sent,")),
        "233 plain and 4 hostile keys were not retracted as leftovers:\n{log}"
    );

    env.sql(&format!(
        "TRUNCATE {QUOTED_TABLE}; INSERT INTO {QUOTED_TABLE} VALUES ('o''brien', 9, 'back')"
    ));
    assert!(env.wait_caught_up(LONG), "{}", again.log_text());
    assert_quoted_equal(&env);
    assert_eq!(env.feldera_count("OrderItems"), 1);
    stop(&mut again);
}

mod quoted_names_and_hostile_keys_are_copied_retracted_and_truncated {
    use super::*;

    #[test]
    fn tokio() {
        quoted_names_and_hostile_keys(Shell::Tokio);
    }

    #[test]
    fn blocking() {
        quoted_names_and_hostile_keys(Shell::Blocking);
    }
}
