//! End to end: a table added to (or removed from) a running deployment (docs/snapshot.md,
//! "Adding and removing tables"). Real PostgreSQL, the Feldera double, both shells.
//!
//! `users` streams; then `items` joins the publication and TABLES and slotline restarts:
//! only `items` is copied, online in chunks beside the stream (docs/online-copy.md), and
//! the stream goes on from the slot where it was. Nothing of `users` is sent again. A table
//! the online copy cannot walk (REPLICA IDENTITY FULL here) is copied under a temporary
//! slot's snapshot instead, and the stream skips the `items` transactions that copy already
//! holds. A route removed later is recorded as removed, its changes still in the slot are
//! skipped, and added again it is copied again (the exported way: its Feldera table holds
//! the old rows).

use serde_json::{json, Value};
use slotline_tests::e2e::{operation, Connector, Env, Shell, Writer};
use slotline_tests::pg::wait_for;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(90);

fn schema() -> Value {
    let table = |name: &str, column: &str, kind: &str| {
        json!({"name": name, "case_sensitive": false, "primary_key": ["id"], "materialized": true, "properties": {},
         "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": column, "case_sensitive": false, "columntype": {"type": kind, "nullable": true, "precision": -1}}]})
    };
    json!({"inputs": [table("users", "name", "VARCHAR"), table("items", "qty", "BIGINT")], "outputs": []})
}

fn setup(users: u64, items: u64) -> String {
    format!(
        "CREATE TABLE users (id bigint PRIMARY KEY, name text);
         CREATE TABLE items (id bigint PRIMARY KEY, qty bigint);
         INSERT INTO users SELECT g, 'u' || g FROM generate_series(1, {users}) g;
         INSERT INTO items SELECT g, g FROM generate_series(1, {items}) g;
         CREATE PUBLICATION pub FOR TABLE users;"
    )
}

fn start(env: &Env, shell: Shell, tables: &str) -> Connector {
    env.start(
        shell,
        &[
            ("TABLES", tables),
            ("SNAPSHOT_MODE", "initial"),
            ("BATCH_LINGER_MS", "0"),
        ],
    )
}

/// The state file's record of `source` (`public.items`), once it says `phase`.
fn route_reaches(env: &Env, source: &str, phase: Option<&str>) -> Option<Value> {
    wait_for(WAIT, || {
        let state = env.state()?;
        if state["phase"] != "complete" {
            return None;
        }
        let route = state["routes"]
            .as_array()?
            .iter()
            .find(|r| r["source"] == source)?
            .clone();
        (route.get("phase").and_then(Value::as_str) == phase).then_some(route)
    })
}

/// Started on the first copy of `tables`, which is complete and caught up.
fn seeded(env: &Env, shell: Shell, tables: &str) -> Connector {
    let connector = start(env, shell, tables);
    assert!(
        env.wait_snapshot_complete_and_caught_up(WAIT),
        "{}",
        connector.log_text()
    );
    connector
}

/// The state file records `items`' own copy as complete.
fn items_copied(env: &Env, connector: &Connector) {
    assert!(
        route_reaches(env, "public.items", Some("complete")).is_some(),
        "{}",
        connector.log_text()
    );
}

/// The slot confirmed everything written, and both tables are equal on both sides.
fn both_equal(env: &Env, connector: &Connector) {
    assert!(env.wait_caught_up(WAIT), "{}", connector.log_text());
    env.assert_rows_equal("users", "users", "id");
    env.assert_rows_equal("items", "items", "id");
}

fn stopped(connector: &mut Connector) {
    assert_eq!(connector.stop(WAIT), Some(0), "{}", connector.log_text());
}

/// No writer: the restart sends exactly the `users` changes made while slotline was
/// down, the `items` changes the slot holds (committed after it joined the publication:
/// the stream delivers them while the copy runs) and the online copy of `items`, nothing
/// else.
fn an_added_table_is_copied_alone(shell: Shell) {
    let env = Env::new("add_table", &setup(50_000, 3_000), schema());
    let mut connector = seeded(&env, shell, "users");
    stopped(&mut connector);
    env.sql(
        "UPDATE items SET qty = qty + 100 WHERE id <= 10; DELETE FROM items WHERE id = 3000;
             UPDATE users SET name = 'down' WHERE id <= 5;",
    );
    env.sql("ALTER PUBLICATION pub ADD TABLE items");
    env.sql("UPDATE items SET qty = -qty WHERE id <= 20; INSERT INTO items VALUES (5000, 5);");
    env.feldera.clear_requests();

    let mut connector = start(&env, shell, "users,items");
    let route = route_reaches(&env, "public.items", Some("complete"));
    let route = route.unwrap_or_else(|| panic!("items never complete:\n{}", connector.log_text()));
    assert!(route["consistent_point"].is_string(), "{route}");
    assert!(route.get("copied_through").is_none(), "{route}");
    both_equal(&env, &connector);
    assert_eq!(
        env.ingress_rows_of("users"),
        5,
        "only the changes made while down"
    );
    assert_eq!(
        env.ingress_rows_of("items"),
        3_000 + 21,
        "the copy (2,999 + id 5000) and the 21 changes of items the slot holds"
    );
    let log = connector.log_text();
    assert!(log.contains("copying public.items online"), "{log}");
    assert!(!log.contains("created temporary replication slot"), "{log}");
    assert!(!log.contains("ERROR"), "{log}");
    assert_eq!(env.slots(), env.slot_name(), "no temporary slot");
    // The users route is still covered by the first copy, items by its own; `status`
    // says so.
    let state = env.state().unwrap();
    assert!(state["routes"][0].get("phase").is_none(), "{state}");
    let status = operation(shell, &env.config(&[]), &["status"]).stdout;
    assert!(
        status.contains("routes copied or removed since: public.items:items complete at"),
        "{status}"
    );

    // Both stream on.
    env.sql("UPDATE items SET qty = 0 WHERE id = 1; UPDATE users SET name = 'up' WHERE id = 6;");
    both_equal(&env, &connector);
    stopped(&mut connector);
}

/// The exported copy (a table whose replica identity is FULL cannot be walked by key):
/// only `items` is copied, under a temporary slot's snapshot; `items` changes committed
/// before that copy (some after it joined the publication, so in the slot too) are not
/// sent twice.
fn an_added_table_without_a_key_identity_is_copied_under_a_temporary_slot(shell: Shell) {
    let env = Env::new("add_table_full", &setup(50_000, 3_000), schema());
    let mut connector = seeded(&env, shell, "users");
    stopped(&mut connector);
    env.sql("ALTER TABLE items REPLICA IDENTITY FULL");
    env.sql(
        "UPDATE items SET qty = qty + 100 WHERE id <= 10; DELETE FROM items WHERE id = 3000;
             UPDATE users SET name = 'down' WHERE id <= 5;",
    );
    env.sql("ALTER PUBLICATION pub ADD TABLE items");
    env.sql("UPDATE items SET qty = -qty WHERE id <= 20; INSERT INTO items VALUES (5000, 5);");
    env.feldera.clear_requests();

    let mut connector = start(&env, shell, "users,items");
    let route = route_reaches(&env, "public.items", Some("complete"));
    let route = route.unwrap_or_else(|| panic!("items never complete:\n{}", connector.log_text()));
    assert!(route["consistent_point"].is_string(), "{route}");
    both_equal(&env, &connector);
    assert_eq!(
        env.ingress_rows_of("users"),
        5,
        "only the changes made while down"
    );
    assert_eq!(
        env.ingress_rows_of("items"),
        3_000,
        "the copy alone: 2,999 + id 5000"
    );
    let log = connector.log_text();
    assert!(
        log.contains("REPLICA IDENTITY full, not its primary key"),
        "{log}"
    );
    assert!(log.contains("created temporary replication slot"), "{log}");
    assert!(!log.contains("ERROR"), "{log}");
    assert_eq!(env.slots(), env.slot_name(), "the temporary slot is gone");
    // The users route is still covered by the first copy, items by its own; `status`
    // says so.
    let state = env.state().unwrap();
    assert!(state["routes"][0].get("phase").is_none(), "{state}");
    let status = operation(shell, &env.config(&[]), &["status"]).stdout;
    assert!(
        status.contains("routes copied or removed since: public.items:items complete at"),
        "{status}"
    );

    // Both stream on.
    env.sql("UPDATE items SET qty = 0 WHERE id = 1; UPDATE users SET name = 'up' WHERE id = 6;");
    both_equal(&env, &connector);
    stopped(&mut connector);
}

/// A writer commits to both tables throughout: before `items` is published, while
/// slotline is down, across the publication change, during the copy and after it. The
/// boundary between copy and stream holds under that: both tables end equal.
fn an_added_table_is_copied_while_a_writer_writes_both(shell: Shell) {
    let env = Env::new("add_table_w", &setup(5_000, 2_000), schema());
    let mut connector = seeded(&env, shell, "users");
    let writer = Writer::start(env.pg, &env.db, Duration::from_millis(2), |n| {
        format!(
            "UPDATE users SET name = name || '.' WHERE id = {u};
             INSERT INTO items VALUES ({i}, {n}) ON CONFLICT (id) DO UPDATE SET qty = excluded.qty;
             UPDATE items SET qty = qty + 1 WHERE id = {k};
             DELETE FROM items WHERE id = {d}",
            u = 1 + n % 5_000,
            i = 10_000 + n,
            k = 1 + n % 2_000,
            d = 2_000 - n % 500
        )
    });
    let wait = |count: u64| assert!(writer.wait_committed(writer.committed() + count, WAIT));
    wait(30);
    stopped(&mut connector);
    wait(30);
    env.sql("ALTER PUBLICATION pub ADD TABLE items");
    wait(30);
    let mut connector = start(&env, shell, "users,items");
    let route = route_reaches(&env, "public.items", Some("complete"));
    assert!(
        route.is_some(),
        "items never complete:\n{}",
        connector.log_text()
    );
    wait(100);
    let written = writer.stop();
    both_equal(&env, &connector);
    assert!(written >= 190, "{written} transactions");
    assert_eq!(env.slots(), env.slot_name(), "the temporary slot is gone");
    stopped(&mut connector);
}

/// A route removed while the slot still holds changes of it (committed before it left
/// the publication):
/// they are skipped, the rest streams on, its Feldera rows stay as they were. Added
/// again, it is copied again and its stale rows are retracted.
fn a_removed_table_goes_stale_and_added_again_is_copied_again(shell: Shell) {
    let env = Env::new("remove_table", &setup(2_000, 2_000), schema());
    env.sql("ALTER PUBLICATION pub ADD TABLE items");
    let mut connector = seeded(&env, shell, "users,items");
    // Changes of items committed while it is still published and no run acknowledged
    // them: the slot carries them to the next run.
    connector.kill();
    env.sql("UPDATE items SET qty = -1 WHERE id <= 100; UPDATE users SET name = 'k' WHERE id = 1;");
    env.sql("ALTER PUBLICATION pub DROP TABLE items");
    env.sql("UPDATE items SET qty = -2 WHERE id <= 50; UPDATE users SET name = 'r' WHERE id = 2;");
    let held: Vec<Value> = env.feldera_rows("items", "id");
    env.feldera.clear_requests();

    let mut connector = start(&env, shell, "users");
    assert!(
        route_reaches(&env, "public.items", Some("removed")).is_some(),
        "{}",
        connector.log_text()
    );
    assert!(env.wait_caught_up(WAIT), "{}", connector.log_text());
    assert!(connector.is_running(), "{}", connector.log_text());
    env.assert_rows_equal("users", "users", "id");
    assert_eq!(
        env.ingress_rows_of("items"),
        0,
        "nothing of a removed route is sent"
    );
    assert_eq!(
        env.feldera_rows("items", "id"),
        held,
        "its Feldera rows stay as they were"
    );
    let log = connector.log_text();
    assert!(log.contains("no longer in TABLES"), "{log}");
    assert!(log.contains("is a removed route's table"), "{log}");
    stopped(&mut connector);

    env.sql("ALTER PUBLICATION pub ADD TABLE items");
    let mut connector = start(&env, shell, "users,items");
    items_copied(&env, &connector);
    both_equal(&env, &connector);
    stopped(&mut connector);
}

/// A removed route is its table, not its name: the state file records the table's OID, so a
/// table created later under the removed route's name and published while slotline runs is
/// not skipped as the removed route's but stops the run as any unrouted table does
/// (exit 1 naming it), nothing of its transaction acknowledged.
fn a_table_created_under_a_removed_route_s_name_is_not_skipped(shell: Shell) {
    let env = Env::new("remove_recreate", &setup(200, 200), schema());
    env.sql("ALTER PUBLICATION pub ADD TABLE items");
    let mut connector = seeded(&env, shell, "users,items");
    let oid: u64 = env
        .sql("SELECT 'items'::regclass::oid")
        .parse()
        .expect("an OID");
    stopped(&mut connector);
    env.sql("ALTER PUBLICATION pub DROP TABLE items");
    let mut connector = start(&env, shell, "users");
    let removed = route_reaches(&env, "public.items", Some("removed"))
        .unwrap_or_else(|| panic!("{}", connector.log_text()));
    assert_eq!(
        removed["oid"], oid,
        "the removed route keeps its table's OID"
    );
    assert!(env.wait_caught_up(WAIT), "{}", connector.log_text());
    env.sql(
        "DROP TABLE items; CREATE TABLE items (id bigint PRIMARY KEY, qty bigint);
         ALTER PUBLICATION pub ADD TABLE items;",
    );
    let inside =
        env.write_txn("INSERT INTO items VALUES (1, 1); INSERT INTO users VALUES (9001, 'n')");
    let exit = connector.wait_exit(WAIT);
    let log = connector.log_text();
    assert_eq!(exit, Some(1), "{log}");
    assert!(
        log.contains("public.items") && log.contains("neither routed nor a partition"),
        "{log}"
    );
    assert!(!log.contains("is a removed route's table"), "{log}");
    assert!(
        env.slot_at_or_before(&inside),
        "nothing of it acknowledged: slot {:?}, commit after {inside}",
        env.slot_confirmed()
    );
}

/// The added table's exported copy (REPLICA IDENTITY FULL) crashes half way
/// (`snapshot_mid_copy`): the state file says the route is `pending` and the slot has not
/// moved; the restart copies it again, retracts what the broken copy left, and sends
/// nothing of `users` again.
fn an_interrupted_added_copy_is_done_again(shell: Shell) {
    let env = Env::new("add_crash", &setup(3_000, 20_000), schema());
    let mut connector = seeded(&env, shell, "users");
    stopped(&mut connector);
    env.sql("ALTER TABLE items REPLICA IDENTITY FULL");
    let confirmed = env.slot_confirmed();
    env.sql("ALTER PUBLICATION pub ADD TABLE items");
    let mut crashing = env.start(
        shell,
        &[
            ("TABLES", "users,items"),
            ("SNAPSHOT_MODE", "initial"),
            ("BATCH_MAX_ROWS", "1000"),
            ("CRASH_AT", "snapshot_mid_copy"),
            ("CRASH_AFTER_BATCHES", "3"),
        ],
    );
    assert_eq!(
        crashing.wait_exit(WAIT),
        Some(70),
        "{}",
        crashing.log_text()
    );
    let state = env.state().unwrap();
    assert_eq!(state["phase"], "complete", "{state}");
    assert_eq!(state["routes"][1]["phase"], "pending", "{state}");
    assert_eq!(env.slot_confirmed(), confirmed, "the slot did not move");
    let partial = env.feldera_count("items");
    assert!((3..20_000).contains(&partial), "{partial} rows of items");
    // Rows the next copy will not carry: the broken copy's leftovers must go.
    env.sql("DELETE FROM items WHERE id <= 2000; UPDATE users SET name = 'x' WHERE id = 1;");
    env.feldera.clear_requests();

    let mut connector = start(&env, shell, "users,items");
    items_copied(&env, &connector);
    both_equal(&env, &connector);
    assert_eq!(
        env.ingress_rows_of("users"),
        1,
        "only the change made while down"
    );
    assert_eq!(env.slots(), env.slot_name(), "no temporary slot is left");
    stopped(&mut connector);
}

/// The added table's online copy crashes half way, at its twentieth durable chunk of 40
/// (`snapshot_mid_copy`): the slot was acknowledged during the copy, the state file
/// records the copy's last durable key; rows already copied are deleted and changed while
/// it is down; the restart goes on after that key (never counted, never exported), and in
/// all the copy sent at most 1.25 times the table's rows (the bound; the 1,701
/// changes made while down are the stream's, not the copy's). What a crash sends again is
/// what was in flight: the chunk passed but not recorded, the chunk read ahead, and the
/// batches sent and not yet durable.
fn an_interrupted_online_copy_goes_on_from_its_last_durable_chunk(shell: Shell) {
    let env = Env::new("add_online_crash", &setup(3_000, 40_000), schema());
    let mut connector = seeded(&env, shell, "users");
    stopped(&mut connector);
    let confirmed = env.slot_confirmed();
    env.sql("ALTER PUBLICATION pub ADD TABLE items");
    env.feldera.clear_requests();
    let mut crashing = env.start(
        shell,
        &[
            ("TABLES", "users,items"),
            ("SNAPSHOT_MODE", "initial"),
            ("COPY_CHUNK_ROWS", "1000"),
            ("CRASH_AT", "snapshot_mid_copy"),
            ("CRASH_AFTER_BATCHES", "20"),
        ],
    );
    assert_eq!(
        crashing.wait_exit(WAIT),
        Some(70),
        "{}",
        crashing.log_text()
    );
    let state = env.state().unwrap();
    let route = &state["routes"][1];
    assert_eq!(route["phase"], "pending", "{state}");
    let through: i64 = route["copied_through"][0]
        .as_str()
        .and_then(|k| k.parse().ok())
        .unwrap_or_else(|| panic!("a recorded key: {state}"));
    assert!((10_000..40_000).contains(&through), "{state}");
    let lsn = |at: Option<String>| {
        let at = at.expect("the slot");
        let (high, low) = at.split_once('/').expect("an LSN");
        (u64::from_str_radix(high, 16).unwrap() << 32) | u64::from_str_radix(low, 16).unwrap()
    };
    assert!(
        lsn(env.slot_confirmed()) > lsn(confirmed),
        "the slot is acknowledged while the copy runs"
    );
    let first = env.ingress_rows_of("items");
    assert!(
        (20_000..40_000).contains(&(first as i64)),
        "{first} rows of items"
    );
    env.sql(
        "DELETE FROM items WHERE id <= 500; UPDATE items SET qty = -1 WHERE id BETWEEN 900 AND 1100;
         UPDATE items SET qty = -2 WHERE id > 39000; UPDATE users SET name = 'x' WHERE id = 1;",
    );
    env.feldera.clear_requests();

    let mut connector = start(&env, shell, "users,items");
    items_copied(&env, &connector);
    both_equal(&env, &connector);
    let log = connector.log_text();
    assert!(log.contains(&format!("after key ({through})")), "{log}");
    assert!(!log.contains("temporary replication slot"), "{log}");
    let second = env.ingress_rows_of("items");
    eprintln!(
        "{shell:?}: items rows sent {first} before the crash, {second} after (1,701 of them changes made while down), through key {through}"
    );
    assert!(
        first + second - 1_701 <= 50_000,
        "{first} + {second} rows of items sent for a 40,000-row table (1,701 of them changes made while down)"
    );
    assert_eq!(
        env.ingress_rows_of("users"),
        1,
        "only the change made while down"
    );
    stopped(&mut connector);
}

#[test]
fn tokio_an_interrupted_online_copy_goes_on_from_its_last_durable_chunk() {
    an_interrupted_online_copy_goes_on_from_its_last_durable_chunk(Shell::Tokio);
}

#[test]
fn blocking_an_interrupted_online_copy_goes_on_from_its_last_durable_chunk() {
    an_interrupted_online_copy_goes_on_from_its_last_durable_chunk(Shell::Blocking);
}

#[test]
fn tokio_an_added_table_without_a_key_identity_is_copied_under_a_temporary_slot() {
    an_added_table_without_a_key_identity_is_copied_under_a_temporary_slot(Shell::Tokio);
}

#[test]
fn blocking_an_added_table_without_a_key_identity_is_copied_under_a_temporary_slot() {
    an_added_table_without_a_key_identity_is_copied_under_a_temporary_slot(Shell::Blocking);
}

#[test]
fn tokio_an_interrupted_added_copy_is_done_again() {
    an_interrupted_added_copy_is_done_again(Shell::Tokio);
}

#[test]
fn blocking_an_interrupted_added_copy_is_done_again() {
    an_interrupted_added_copy_is_done_again(Shell::Blocking);
}

#[test]
fn tokio_an_added_table_is_copied_alone() {
    an_added_table_is_copied_alone(Shell::Tokio);
}

#[test]
fn blocking_an_added_table_is_copied_alone() {
    an_added_table_is_copied_alone(Shell::Blocking);
}

#[test]
fn tokio_an_added_table_is_copied_while_a_writer_writes_both() {
    an_added_table_is_copied_while_a_writer_writes_both(Shell::Tokio);
}

#[test]
fn blocking_an_added_table_is_copied_while_a_writer_writes_both() {
    an_added_table_is_copied_while_a_writer_writes_both(Shell::Blocking);
}

#[test]
fn tokio_a_table_created_under_a_removed_route_s_name_is_not_skipped() {
    a_table_created_under_a_removed_route_s_name_is_not_skipped(Shell::Tokio);
}

#[test]
fn blocking_a_table_created_under_a_removed_route_s_name_is_not_skipped() {
    a_table_created_under_a_removed_route_s_name_is_not_skipped(Shell::Blocking);
}

#[test]
fn tokio_a_removed_table_goes_stale_and_added_again_is_copied_again() {
    a_removed_table_goes_stale_and_added_again_is_copied_again(Shell::Tokio);
}

#[test]
fn blocking_a_removed_table_goes_stale_and_added_again_is_copied_again() {
    a_removed_table_goes_stale_and_added_again_is_copied_again(Shell::Blocking);
}
