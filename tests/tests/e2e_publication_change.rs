//! End to end: a publication whose row filter or column list changes under a deployment
//! (issue 31; docs/snapshot.md, "What the publication publishes", "Changes while running").
//! Real PostgreSQL, the Feldera double, both shells.
//!
//! - A row filter widened and narrowed while slotline runs (`users WHERE (id % 3 <> 0)` ->
//!   `users WHERE (id % 2 = 0)`): the changes after the `ALTER PUBLICATION` follow the new
//!   filter at once (a new row the old filter refused arrives, one the new filter refuses
//!   does not, an update of a row outside it is not sent, a key change moving a row out of
//!   it arrives as a delete), and the rows Feldera already held are left as they were. The
//!   next start warns naming `public.users`, copies users alone under a temporary slot's
//!   snapshot and retracts what the old filter left, so that Feldera's users is exactly
//!   `WHERE id % 2 = 0`; nothing of items is sent again, and the state file's users route
//!   records the new filter.
//! - A column list widened (`items (sku, qty)` -> `items (sku, qty, blob)`) and narrowed
//!   back: streamed changes carry the columns published at the time; each next start copies
//!   items again, so that `blob` holds its value in every row after the first and is NULL in
//!   every row after the second (no request body of that last start holds a value of it).
//! - The re-copy of a table whose filter changed crashes half way (`snapshot_mid_copy`,
//!   exit 70): the route is `pending`, the slot did not move; the next start copies it
//!   again and Feldera ends equal to what the publication publishes now.
//! - The filter of the second route changes while both routes have one (users keeps
//!   `WHERE (id % 3 <> 0)`, items goes from `WHERE (sku % 2 = 0)` to `WHERE (sku % 5 = 0)`):
//!   the next start copies items, not first in TABLES, alone under items' own filter (a
//!   copy under users' filter would name `id`, which items has not, and PostgreSQL would
//!   refuse it) and retracts what the old filter left, so that Feldera's items is exactly
//!   `WHERE sku % 5 = 0`; nothing of users is sent again.

use serde_json::{json, Value};
use slotline_tests::e2e::{Connector, Env, Shell};
use slotline_tests::feldera_double::DoubleConfig;
use slotline_tests::pg::wait_for;
use std::collections::BTreeMap;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

/// Every value of `items.blob` starts with this.
const SECRET: &str = "SECRET-";

/// What the state file records of a route whose publication has no filter and no list.
const EVERYTHING: &str = "every row; every column";
/// ... of users under the first filter, and under the second.
const FIRST_FILTER: &str = "rows where ((id % 3) <> 0); every column";
const SECOND_FILTER: &str = "rows where ((id % 2) = 0); every column";
/// ... of items under `items (sku, qty)`.
const WITHOUT_BLOB: &str = "every row; columns but blob";
/// ... of items under its first filter, and under its second.
const ITEMS_FIRST_FILTER: &str = "rows where ((sku % 2) = 0); every column";
const ITEMS_SECOND_FILTER: &str = "rows where ((sku % 5) = 0); every column";

/// The published sets under the second filter.
const USERS_SECOND: &str = "SELECT id, name FROM users WHERE id % 2 = 0";
const ITEMS_WHOLE: &str = "SELECT sku, qty, blob FROM items";
const ITEMS_WITHOUT_BLOB: &str = "SELECT sku, qty, NULL::text AS blob FROM items";
const USERS_WHOLE: &str = "SELECT id, name FROM users";
/// The published sets under users' first filter, and under items' two filters.
const USERS_FIRST: &str = "SELECT id, name FROM users WHERE id % 3 <> 0";
const ITEMS_EVEN: &str = "SELECT sku, qty, blob FROM items WHERE sku % 2 = 0";
const ITEMS_FIFTHS: &str = "SELECT sku, qty, blob FROM items WHERE sku % 5 = 0";

fn column(name: &str, ty: Value) -> Value {
    json!({"name": name, "case_sensitive": false, "columntype": ty})
}

fn int(nullable: bool) -> Value {
    json!({"type": "INTEGER", "nullable": nullable})
}

fn varchar() -> Value {
    json!({"type": "VARCHAR", "nullable": true, "precision": -1})
}

fn table(name: &str, key: &str, fields: Vec<Value>) -> Value {
    json!({"name": name, "case_sensitive": false, "primary_key": [key], "materialized": true,
           "properties": {}, "fields": fields})
}

/// users(id, name) and items(sku, qty, blob), every non-key column nullable.
fn schema() -> Value {
    let users = table(
        "users",
        "id",
        vec![column("id", int(false)), column("name", varchar())],
    );
    let items = table(
        "items",
        "sku",
        vec![
            column("sku", int(false)),
            column("qty", int(true)),
            column("blob", varchar()),
        ],
    );
    json!({"inputs": [users, items], "outputs": []})
}

/// `users` rows and `items` rows (each `blob` a recognisable `SECRET-<sku>`), published as
/// `FOR TABLE <tables>`.
fn setup(users: u32, items: u32, tables: &str) -> String {
    format!(
        "CREATE TABLE users (id int PRIMARY KEY, name text);
         CREATE TABLE items (sku int PRIMARY KEY, qty int, blob text);
         INSERT INTO users SELECT g, 'user ' || g FROM generate_series(1, {users}) g;
         INSERT INTO items SELECT g, g % 17, '{SECRET}' || g FROM generate_series(1, {items}) g;
         CREATE PUBLICATION pub FOR TABLE {tables};"
    )
}

/// An environment whose double keeps every request body.
fn env_with_capture(prefix: &str, setup: &str) -> Env {
    Env::with_double(
        prefix,
        setup,
        DoubleConfig::new("p", schema()).with_body_capture(true),
    )
}

fn start(env: &Env, shell: Shell, extra: &[(&str, &str)]) -> Connector {
    let mut pairs = vec![
        ("TABLES", "users,items"),
        ("SNAPSHOT_MODE", "initial"),
        ("BATCH_LINGER_MS", "0"),
    ];
    pairs.extend_from_slice(extra);
    env.start(shell, &pairs)
}

/// Started on the first copy, which is complete and caught up.
fn copied(env: &Env, shell: Shell) -> Connector {
    let connector = start(env, shell, &[]);
    assert!(
        env.wait_snapshot_complete_and_caught_up(LONG),
        "the copy did not finish:\n{}",
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

fn stopped(connector: &mut Connector) {
    assert_eq!(
        connector.stop(LONG),
        Some(0),
        "a graceful stop:\n{}",
        connector.log_text()
    );
}

/// The state file's record of `source` (`public.users`), if the file has one.
fn route_record(env: &Env, source: &str) -> Option<Value> {
    env.state()?["routes"]
        .as_array()?
        .iter()
        .find(|r| r["source"] == source)
        .cloned()
}

/// Waits until the state file (complete) records `source`'s own copy as complete, made of
/// what the publication publishes as `published`; that record.
fn recopied(env: &Env, connector: &Connector, source: &str, published: &str) -> Value {
    let record = wait_for(LONG, || {
        if env.state_phase().as_deref() != Some("complete") {
            return None;
        }
        let route = route_record(env, source)?;
        (route["phase"] == "complete" && route["published"] == published).then_some(route)
    });
    record.unwrap_or_else(|| {
        panic!(
            "{source} was never recorded copied again as {published:?}; the state file: {}\n{}",
            env.state().unwrap_or_default(),
            connector.log_text()
        )
    })
}

/// Failed checks of one scenario, reported together at its end.
#[derive(Default)]
struct Findings(Vec<String>);

impl Findings {
    fn check(&mut self, result: Result<(), String>) {
        if let Err(finding) = result {
            eprintln!("finding: {finding}");
            self.0.push(finding);
        }
    }

    fn expect(&mut self, holds: bool, what: impl FnOnce() -> String) {
        self.check(if holds { Ok(()) } else { Err(what()) });
    }

    fn finish(self, connector: &Connector) {
        if self.0.is_empty() {
            return;
        }
        panic!(
            "{} check(s) failed:\n- {}\n--- connector log\n{}",
            self.0.len(),
            self.0.join("\n- "),
            connector.log_text()
        );
    }
}

/// Feldera's `table` against PostgreSQL's rows of `query`, matched by `key`: the rows
/// missing from Feldera, the rows Feldera holds that it should not, and the rows that
/// differ (a few of each, and how many).
fn feldera_equals(
    env: &Env,
    table: &str,
    key: &str,
    query: &str,
    what: &str,
) -> Result<(), String> {
    let by_key = |rows: Vec<Value>| -> BTreeMap<String, Value> {
        rows.into_iter().map(|r| (r[key].to_string(), r)).collect()
    };
    let expected = by_key(env.pg_rows(&format!("({query})"), key));
    let held = by_key(env.feldera_rows(table, key));
    let missing: Vec<String> = expected
        .iter()
        .filter(|(k, _)| !held.contains_key(*k))
        .map(|(_, row)| row.to_string())
        .collect();
    let extra: Vec<String> = held
        .iter()
        .filter(|(k, _)| !expected.contains_key(*k))
        .map(|(_, row)| row.to_string())
        .collect();
    let differ: Vec<String> = expected
        .iter()
        .filter_map(|(k, row)| {
            let feldera = held.get(k)?;
            (feldera != row).then(|| format!("Feldera {feldera} / published {row}"))
        })
        .collect();
    if missing.is_empty() && extra.is_empty() && differ.is_empty() {
        return Ok(());
    }
    let few = |rows: &[String]| rows.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
    Err(format!(
        "{what}: Feldera's {table} ({} rows) is not the published set ({} rows): \
         {} missing [{}], {} not published [{}], {} differ [{}]",
        held.len(),
        expected.len(),
        missing.len(),
        few(&missing),
        extra.len(),
        few(&extra),
        differ.len(),
        few(&differ),
    ))
}

/// Feldera's row of `table` whose `key` is `id`, if it holds one.
fn feldera_row(env: &Env, table: &str, key: &str, id: i64) -> Option<Value> {
    env.feldera_rows(table, key)
        .into_iter()
        .find(|r| r[key].as_i64() == Some(id))
}

/// The table an ingress path (`/v0/pipelines/p/ingress/<table>?...`) feeds.
fn ingress_table(path: &str) -> Option<&str> {
    let rest = path.split("/ingress/").nth(1)?;
    Some(rest.split('?').next().unwrap_or(rest))
}

/// Request bodies captured since the last clearing that fed `table`.
fn bodies_for(env: &Env, table: &str) -> usize {
    env.feldera
        .captured_bodies()
        .iter()
        .filter(|b| ingress_table(&b.path) == Some(table))
        .count()
}

/// Rows of `table` the double accepted since its log was last cleared.
fn ingress_rows(env: &Env, table: &str) -> u64 {
    env.feldera
        .requests()
        .iter()
        .filter(|r| r.endpoint == "ingress" && r.status == 200 && r.table.as_deref() == Some(table))
        .map(|r| r.rows.unwrap_or(0))
        .sum()
}

/// Replication slots of this environment's database, by name.
fn slots(env: &Env) -> String {
    env.sql(&format!(
        "SELECT string_agg(slot_name, ',' ORDER BY slot_name) FROM pg_replication_slots WHERE database = '{}'",
        env.db
    ))
}

/// The start's log warns that `source`'s publication changed since its copy.
fn warned_republished(log: &str, source: &str) -> bool {
    log.lines().any(|line| {
        line.contains(&format!(
            "publishes other rows or columns of {source} than when it was copied"
        ))
    })
}

/// The checks of a restart that copied users again alone: the warning names users (when
/// `warned`: a start finishing an interrupted re-copy names it as one) and not items, a
/// temporary slot was created and is gone, items' record is untouched.
fn users_recopied_alone(env: &Env, findings: &mut Findings, connector: &Connector, warned: bool) {
    let log = connector.log_text();
    findings.expect(!warned || warned_republished(&log, "public.users"), || {
        "the restart does not warn that users' publication changed".to_owned()
    });
    findings.expect(!warned_republished(&log, "public.items"), || {
        "the restart warns that items' publication changed, which it did not".to_owned()
    });
    findings.expect(log.contains("created temporary replication slot"), || {
        "the restart did not copy under a temporary slot".to_owned()
    });
    let left = slots(env);
    findings.expect(left == env.slot_name(), || {
        format!("slots after the re-copy: {left} (the temporary one should be gone)")
    });
    let items = route_record(env, "public.items").unwrap_or_default();
    findings.expect(items["published"] == EVERYTHING, || {
        format!("the items route should still record {EVERYTHING:?}: {items}")
    });
    findings.expect(items.get("phase").is_none(), || {
        format!("the items route was copied again: {items}")
    });
}

/// A row filter widened and narrowed while streaming: the stream follows the new filter at
/// once, the next start copies users again (alone) to the new published set.
fn a_changed_row_filter_streams_at_once_and_the_next_start_copies_the_table_again(shell: Shell) {
    let env = env_with_capture(
        "pubchg_filter",
        &setup(2_000, 300, "users WHERE (id % 3 <> 0), items"),
    );
    let mut findings = Findings::default();
    let mut connector = copied(&env, shell);
    findings.check(feldera_equals(
        &env,
        "users",
        "id",
        "SELECT id, name FROM users WHERE id % 3 <> 0",
        "after the first copy",
    ));
    findings.check(feldera_equals(
        &env,
        "items",
        "sku",
        ITEMS_WHOLE,
        "after the first copy",
    ));
    let users = route_record(&env, "public.users").unwrap_or_default();
    findings.expect(users["published"] == FIRST_FILTER, || {
        format!("the first copy's users route should record {FIRST_FILTER:?}: {users}")
    });

    env.sql("ALTER PUBLICATION pub SET TABLE users WHERE (id % 2 = 0), items");
    // Inserts: 3000 and 3002 are in the new filter (3000 was not in the old one), 3001 and
    // 3003 are not (3001 was in the old one).
    env.sql(
        "INSERT INTO users VALUES (3000, 'new, even'), (3001, 'new, odd'), (3002, 'new, even'),
           (3003, 'new, odd')",
    );
    // Updates in place: 10, 12, ..., 20 are published (12 and 18 Feldera never had), 11,
    // 13, ..., 19 not (Feldera has 11, 13, 17 and 19 from the old filter).
    env.sql("UPDATE users SET name = name || ' (renamed)' WHERE id BETWEEN 10 AND 20");
    // Deletes: 8 is published (Feldera drops it), 7 is not (Feldera keeps it).
    env.sql("DELETE FROM users WHERE id IN (7, 8)");
    // A key change out of the new filter: a delete of 4; and one into it: an insert of 5002.
    env.sql("UPDATE users SET id = 5001 WHERE id = 4; UPDATE users SET id = 5002 WHERE id = 25");
    // items streams on.
    env.sql("UPDATE items SET qty = qty + 100 WHERE sku <= 10; DELETE FROM items WHERE sku = 300");
    caught_up(&env, &connector);

    let held = |id: i64| feldera_row(&env, "users", "id", id);
    let name = |id: i64| held(id).map(|r| r["name"].clone());
    let mut stream = |holds: bool, what: &str| {
        findings.expect(holds, || format!("the stream after the ALTER: {what}"));
    };
    stream(
        name(3000) == Some(json!("new, even")),
        "3000 (id % 2 = 0, id % 3 = 0) should arrive",
    );
    stream(name(3002) == Some(json!("new, even")), "3002 should arrive");
    stream(held(3001).is_none(), "3001 (odd) should not arrive");
    stream(held(3003).is_none(), "3003 (odd) should not arrive");
    stream(
        name(10) == Some(json!("user 10 (renamed)")),
        "the update of 10 should arrive",
    );
    stream(
        name(11) == Some(json!("user 11")),
        "11 (odd) is not published: its update should not arrive, its old row stay",
    );
    stream(held(8).is_none(), "the delete of 8 should arrive");
    stream(
        name(7) == Some(json!("user 7")),
        "the delete of 7 (odd) is not published: Feldera keeps it",
    );
    stream(
        held(4).is_none(),
        "4 -> 5001 should arrive as a delete of 4",
    );
    stream(held(5001).is_none(), "5001 (odd) should not arrive");
    stream(
        name(5002) == Some(json!("user 25")),
        "25 -> 5002 should arrive as an insert of 5002",
    );
    findings.check(feldera_equals(
        &env,
        "items",
        "sku",
        ITEMS_WHOLE,
        "after streaming",
    ));
    stopped(&mut connector);

    env.feldera.clear_captured_bodies();
    env.feldera.clear_requests();
    let mut connector = start(&env, shell, &[]);
    let users = recopied(&env, &connector, "public.users", SECOND_FILTER);
    caught_up(&env, &connector);
    findings.expect(users["consistent_point"].is_string(), || {
        format!("the re-copied users route has no consistent point: {users}")
    });
    findings.check(feldera_equals(
        &env,
        "users",
        "id",
        USERS_SECOND,
        "after the re-copy",
    ));
    findings.check(feldera_equals(
        &env,
        "items",
        "sku",
        ITEMS_WHOLE,
        "after the re-copy",
    ));
    let items_bodies = bodies_for(&env, "items");
    findings.expect(items_bodies == 0, || {
        format!("the restart sent {items_bodies} request bodies to items, whose publication did not change")
    });
    findings.expect(bodies_for(&env, "users") > 0, || {
        "the restart sent no request body to users".to_owned()
    });
    users_recopied_alone(&env, &mut findings, &connector, true);

    // Both stream on, users through the new filter.
    env.sql(
        "INSERT INTO users VALUES (6000, 'after'), (6001, 'after, odd');
         UPDATE items SET qty = 0 WHERE sku = 1",
    );
    caught_up(&env, &connector);
    findings.check(feldera_equals(
        &env,
        "users",
        "id",
        USERS_SECOND,
        "streaming on",
    ));
    findings.check(feldera_equals(
        &env,
        "items",
        "sku",
        ITEMS_WHOLE,
        "streaming on",
    ));
    stopped(&mut connector);
    findings.finish(&connector);
}

/// A column list widened and narrowed back: each next start copies items again, with
/// `blob` as the publication publishes it then.
fn a_changed_column_list_copies_the_table_again_with_its_columns(shell: Shell) {
    let env = env_with_capture(
        "pubchg_columns",
        &setup(200, 500, "items (sku, qty), users"),
    );
    let mut findings = Findings::default();
    let mut connector = copied(&env, shell);
    findings.check(feldera_equals(
        &env,
        "items",
        "sku",
        ITEMS_WITHOUT_BLOB,
        "after the first copy",
    ));
    findings.check(feldera_equals(
        &env,
        "users",
        "id",
        USERS_WHOLE,
        "after the first copy",
    ));
    let items = route_record(&env, "public.items").unwrap_or_default();
    findings.expect(items["published"] == WITHOUT_BLOB, || {
        format!("the first copy's items route should record {WITHOUT_BLOB:?}: {items}")
    });
    findings.expect(env.feldera.bodies_containing(SECRET).is_empty(), || {
        "the first copy sent a value of blob, which the column list leaves out".to_owned()
    });

    // Widened while running: changes after it carry blob, rows Feldera holds keep NULL.
    env.sql("ALTER PUBLICATION pub SET TABLE items (sku, qty, blob), users");
    env.sql("UPDATE items SET qty = qty + 1000 WHERE sku <= 5");
    caught_up(&env, &connector);
    let streamed: Vec<Value> = (1..=5)
        .filter_map(|sku| feldera_row(&env, "items", "sku", sku))
        .filter(|r| r["blob"].as_str() != Some(&format!("{SECRET}{}", r["sku"])))
        .collect();
    findings.expect(streamed.is_empty(), || {
        format!(
            "updates after the column list names blob should carry it; Feldera holds {streamed:?}"
        )
    });
    let untouched = feldera_row(&env, "items", "sku", 6).unwrap_or_default();
    findings.expect(untouched["blob"].is_null(), || {
        format!("a row no change touched is not revisited, its blob stays NULL: {untouched}")
    });
    stopped(&mut connector);

    env.feldera.clear_captured_bodies();
    let mut connector = start(&env, shell, &[]);
    recopied(&env, &connector, "public.items", EVERYTHING);
    caught_up(&env, &connector);
    findings.check(feldera_equals(
        &env,
        "items",
        "sku",
        ITEMS_WHOLE,
        "after the widening re-copy",
    ));
    findings.check(feldera_equals(
        &env,
        "users",
        "id",
        USERS_WHOLE,
        "after the widening re-copy",
    ));
    let log = connector.log_text();
    findings.expect(warned_republished(&log, "public.items"), || {
        "the restart after widening does not warn that items' publication changed".to_owned()
    });
    findings.expect(bodies_for(&env, "users") == 0, || {
        "the restart after widening sent users again".to_owned()
    });

    // Narrowed back while running: changes after it carry no blob.
    env.sql("ALTER PUBLICATION pub SET TABLE items (sku, qty), users");
    env.sql("UPDATE items SET qty = qty + 2000 WHERE sku BETWEEN 6 AND 10");
    caught_up(&env, &connector);
    let streamed: Vec<Value> = (6..=10)
        .filter_map(|sku| feldera_row(&env, "items", "sku", sku))
        .filter(|r| !r["blob"].is_null() || r["qty"].as_i64() < Some(2000))
        .collect();
    findings.expect(streamed.is_empty(), || {
        format!(
            "updates after the column list leaves blob out again should not carry it; \
             Feldera holds {streamed:?}"
        )
    });
    stopped(&mut connector);

    env.feldera.clear_captured_bodies();
    let mut connector = start(&env, shell, &[]);
    recopied(&env, &connector, "public.items", WITHOUT_BLOB);
    caught_up(&env, &connector);
    findings.check(feldera_equals(
        &env,
        "items",
        "sku",
        ITEMS_WITHOUT_BLOB,
        "after the narrowing re-copy",
    ));
    findings.check(feldera_equals(
        &env,
        "users",
        "id",
        USERS_WHOLE,
        "after the narrowing re-copy",
    ));
    let log = connector.log_text();
    findings.expect(warned_republished(&log, "public.items"), || {
        "the restart after narrowing does not warn that items' publication changed".to_owned()
    });
    findings.expect(bodies_for(&env, "items") > 0, || {
        "the restart after narrowing sent no request body to items".to_owned()
    });
    findings.expect(bodies_for(&env, "users") == 0, || {
        "the restart after narrowing sent users again".to_owned()
    });
    let leaked = env.feldera.bodies_containing(SECRET).len();
    findings.expect(leaked == 0, || {
        format!("{leaked} request bodies of the narrowing restart hold a value of blob")
    });
    stopped(&mut connector);
    findings.finish(&connector);
}

/// The re-copy after a filter change crashes half way; the next start completes it.
fn a_crash_in_the_recopy_after_a_filter_change_is_copied_again(shell: Shell) {
    let env = env_with_capture(
        "pubchg_crash",
        &setup(20_000, 300, "users WHERE (id % 3 <> 0), items"),
    );
    let mut connector = copied(&env, shell);
    stopped(&mut connector);
    env.sql("ALTER PUBLICATION pub SET TABLE users WHERE (id % 2 = 0), items");
    // While down: users changes the re-copy holds (the stream must skip them), and items
    // changes only the stream carries.
    env.sql(
        "UPDATE users SET name = 'down' WHERE id <= 10;
         DELETE FROM users WHERE id BETWEEN 100 AND 110;
         UPDATE items SET qty = -qty WHERE sku <= 3",
    );
    let confirmed = env.slot_confirmed();

    let mut crashing = start(
        &env,
        shell,
        &[
            ("BATCH_MAX_ROWS", "1000"),
            ("CRASH_AT", "snapshot_mid_copy"),
            ("CRASH_AFTER_BATCHES", "3"),
        ],
    );
    assert_eq!(
        crashing.wait_exit(LONG),
        Some(70),
        "the crash point was not reached:\n{}",
        crashing.log_text()
    );
    let mut findings = Findings::default();
    findings.expect(
        warned_republished(&crashing.log_text(), "public.users"),
        || "the crashed start does not warn that users' publication changed".to_owned(),
    );
    let state = env.state().unwrap_or_default();
    let users = route_record(&env, "public.users").unwrap_or_default();
    findings.expect(state["phase"] == "complete", || {
        format!("the file's own copy stays complete: {state}")
    });
    findings.expect(
        users["phase"] == "pending" && users["published"] == SECOND_FILTER,
        || format!("users' re-copy should be recorded pending under the new filter: {users}"),
    );
    findings.expect(env.slot_confirmed() == confirmed, || {
        "the crashed start moved the slot".to_owned()
    });
    findings.check(
        match feldera_equals(&env, "users", "id", USERS_SECOND, "after the crash") {
            Ok(()) => Err("the crash came after the whole re-copy: nothing is left to test".into()),
            Err(_) => Ok(()),
        },
    );
    // Rows the next copy will not carry, which Feldera holds (from the first copy or the
    // broken one): its leftovers, which only a retraction removes (the stream skips users'
    // transactions the copy's snapshot holds).
    let low = || {
        env.feldera_rows("users", "id")
            .iter()
            .filter(|r| r["id"].as_i64().is_some_and(|id| id <= 600))
            .count()
    };
    findings.expect(low() > 0, || {
        "Feldera holds no users row with id <= 600 before they are deleted".to_owned()
    });
    env.sql(
        "DELETE FROM users WHERE id <= 600;
         UPDATE users SET name = 'after the crash' WHERE id BETWEEN 1000 AND 1010",
    );

    env.feldera.clear_requests();
    let mut connector = start(&env, shell, &[]);
    recopied(&env, &connector, "public.users", SECOND_FILTER);
    caught_up(&env, &connector);
    findings.check(feldera_equals(
        &env,
        "users",
        "id",
        USERS_SECOND,
        "after the crash and the restart",
    ));
    findings.check(feldera_equals(
        &env,
        "items",
        "sku",
        ITEMS_WHOLE,
        "after the crash and the restart",
    ));
    let items = ingress_rows(&env, "items");
    findings.expect(items == 3, || {
        format!("items should get only the 3 changes made while down, got {items} rows")
    });
    users_recopied_alone(&env, &mut findings, &connector, false);
    stopped(&mut connector);
    findings.finish(&connector);
}

/// Both routes have a row filter, each on a column only its table has, and the second
/// route's changes while running: the next start copies items, the second route in TABLES,
/// again alone and under items' own filter, in its copy and in its question of what Feldera
/// holds that the copy left (both read users' filter before e265c78).
fn a_changed_filter_of_the_second_route_copies_it_under_its_own_filter(shell: Shell) {
    let env = env_with_capture(
        "pubchg_second",
        &setup(
            300,
            400,
            "users WHERE (id % 3 <> 0), items WHERE (sku % 2 = 0)",
        ),
    );
    let mut findings = Findings::default();
    let mut connector = copied(&env, shell);
    findings.check(feldera_equals(
        &env,
        "users",
        "id",
        USERS_FIRST,
        "after the first copy",
    ));
    findings.check(feldera_equals(
        &env,
        "items",
        "sku",
        ITEMS_EVEN,
        "after the first copy",
    ));
    let users = route_record(&env, "public.users").unwrap_or_default();
    findings.expect(users["published"] == FIRST_FILTER, || {
        format!("the first copy's users route should record {FIRST_FILTER:?}: {users}")
    });
    let items = route_record(&env, "public.items").unwrap_or_default();
    findings.expect(items["published"] == ITEMS_FIRST_FILTER, || {
        format!("the first copy's items route should record {ITEMS_FIRST_FILTER:?}: {items}")
    });

    // Only items' filter changes; users' is given again as it was.
    env.sql("ALTER PUBLICATION pub SET TABLE users WHERE (id % 3 <> 0), items WHERE (sku % 5 = 0)");
    // 405 is in the new filter and not in the old one, 406 in the old one and not in the new
    // one; users streams on through its own filter: 999 is refused, 1000 published.
    env.sql(
        "INSERT INTO items VALUES (405, 1, 'new, fifth'), (406, 2, 'new, even');
         INSERT INTO users VALUES (999, 'new, third'), (1000, 'new, published')",
    );
    caught_up(&env, &connector);
    let item = |sku: i64| feldera_row(&env, "items", "sku", sku);
    let user = |id: i64| feldera_row(&env, "users", "id", id);
    findings.expect(item(405).is_some_and(|r| r["blob"] == "new, fifth"), || {
        "the stream after the ALTER: 405 (sku % 5 = 0, odd) should arrive".to_owned()
    });
    findings.expect(item(406).is_none(), || {
        "the stream after the ALTER: 406 (even, sku % 5 <> 0) should not arrive".to_owned()
    });
    findings.expect(user(999).is_none(), || {
        "the stream after the ALTER: users 999 (id % 3 = 0) should not arrive".to_owned()
    });
    findings.expect(user(1000).is_some(), || {
        "the stream after the ALTER: users 1000 should arrive".to_owned()
    });
    stopped(&mut connector);

    env.feldera.clear_captured_bodies();
    let mut connector = start(&env, shell, &[]);
    let items = recopied(&env, &connector, "public.items", ITEMS_SECOND_FILTER);
    caught_up(&env, &connector);
    findings.expect(items["consistent_point"].is_string(), || {
        format!("the re-copied items route has no consistent point: {items}")
    });
    findings.check(feldera_equals(
        &env,
        "items",
        "sku",
        ITEMS_FIFTHS,
        "after the re-copy",
    ));
    findings.check(feldera_equals(
        &env,
        "users",
        "id",
        USERS_FIRST,
        "after the re-copy",
    ));
    let users_bodies = bodies_for(&env, "users");
    findings.expect(users_bodies == 0, || {
        format!("the restart sent {users_bodies} request bodies to users, whose publication did not change")
    });
    findings.expect(bodies_for(&env, "items") > 0, || {
        "the restart sent no request body to items".to_owned()
    });
    let log = connector.log_text();
    findings.expect(warned_republished(&log, "public.items"), || {
        "the restart does not warn that items' publication changed".to_owned()
    });
    findings.expect(!warned_republished(&log, "public.users"), || {
        "the restart warns that users' publication changed, which it did not".to_owned()
    });
    findings.expect(log.contains("created temporary replication slot"), || {
        "the restart did not copy under a temporary slot".to_owned()
    });
    let left = slots(&env);
    findings.expect(left == env.slot_name(), || {
        format!("slots after the re-copy: {left} (the temporary one should be gone)")
    });
    let users = route_record(&env, "public.users").unwrap_or_default();
    findings.expect(
        users["published"] == FIRST_FILTER && users.get("phase").is_none(),
        || format!("the users route should be untouched, recording {FIRST_FILTER:?}: {users}"),
    );

    // Both stream on, items through its new filter.
    env.sql(
        "INSERT INTO items VALUES (500, 3, 'after'), (502, 4, 'after, even');
         UPDATE items SET qty = 0 WHERE sku IN (10, 12);
         UPDATE users SET name = 'after' WHERE id IN (1, 3)",
    );
    caught_up(&env, &connector);
    findings.check(feldera_equals(
        &env,
        "items",
        "sku",
        ITEMS_FIFTHS,
        "streaming on",
    ));
    findings.check(feldera_equals(
        &env,
        "users",
        "id",
        USERS_FIRST,
        "streaming on",
    ));
    stopped(&mut connector);
    findings.finish(&connector);
}

slotline_tests::both_shells!(
    a_changed_row_filter_streams_at_once_and_the_next_start_copies_the_table_again,
    a_changed_column_list_copies_the_table_again_with_its_columns,
    a_crash_in_the_recopy_after_a_filter_change_is_copied_again,
    a_changed_filter_of_the_second_route_copies_it_under_its_own_filter,
);
