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

mod publication_support;

use publication_support::{
    caught_up, column, copied, env_with_capture, feldera_equals, int, published_sets, start,
    stopped, table, varchar, Findings, SECRET,
};
use serde_json::{json, Value};
use slotline_tests::e2e::{Connector, Env, Shell};
use slotline_tests::pg::wait_for;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

/// Every start copies both tables first, and sends each batch as soon as it is cut.
const TABLES: &str = "users,items";
const NO_LINGER: (&str, &str) = ("BATCH_LINGER_MS", "0");

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

/// users(id, name) and items(sku, qty, blob), every non-key column nullable.
fn schema() -> Value {
    let users = table(
        "users",
        "id",
        vec![column("id", int(false)), column("name", varchar(true))],
    );
    let items = table(
        "items",
        "sku",
        vec![
            column("sku", int(false)),
            column("qty", int(true)),
            column("blob", varchar(true)),
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

/// The start's log warns that `source`'s publication changed since its copy.
fn warned_republished(log: &str, source: &str) -> bool {
    log.lines().any(|line| {
        line.contains(&format!(
            "publishes other rows or columns of {source} than when it was copied"
        ))
    })
}

/// The first copy recorded `table`'s route as made of what the publication publishes as
/// `published`.
fn first_copy_recorded(env: &Env, findings: &mut Findings, table: &str, published: &str) {
    let route = route_record(env, &format!("public.{table}")).unwrap_or_default();
    findings.expect(route["published"] == published, || {
        format!("the first copy's {table} route should record {published:?}: {route}")
    });
}

/// Started again, waited for until `table` is recorded copied again as `published` and
/// every commit is acknowledged; the connector and `table`'s route record.
fn copied_again(env: &Env, shell: Shell, table: &str, published: &str) -> (Connector, Value) {
    let connector = start(env, shell, TABLES, &[NO_LINGER]);
    let route = recopied(env, &connector, &format!("public.{table}"), published);
    caught_up(env, &connector, LONG);
    (connector, route)
}

/// Since the captured bodies were cleared, request bodies went to `copied` and none to
/// `untouched`.
fn sent_only_to(env: &Env, findings: &mut Findings, copied: &str, untouched: &str) {
    let untouched_bodies = bodies_for(env, untouched);
    findings.expect(untouched_bodies == 0, || {
        format!(
            "the restart sent {untouched_bodies} request bodies to {untouched}, whose publication did not change"
        )
    });
    findings.expect(bodies_for(env, copied) > 0, || {
        format!("the restart sent no request body to {copied}")
    });
}

/// The checks of a restart that copied `copied` again alone: the warning names `copied`
/// (when `warned`: a start finishing an interrupted re-copy names it as one) and not
/// `untouched`, a temporary slot was created and is gone, and `untouched`'s record is as it
/// was, still recording `published` and no copy of its own.
fn recopied_alone(
    env: &Env,
    findings: &mut Findings,
    connector: &Connector,
    copied: &str,
    untouched: &str,
    published: &str,
    warned: bool,
) {
    let log = connector.log_text();
    findings.expect(
        !warned || warned_republished(&log, &format!("public.{copied}")),
        || format!("the restart does not warn that {copied}' publication changed"),
    );
    findings.expect(
        !warned_republished(&log, &format!("public.{untouched}")),
        || format!("the restart warns that {untouched}' publication changed, which it did not"),
    );
    findings.expect(log.contains("created temporary replication slot"), || {
        "the restart did not copy under a temporary slot".to_owned()
    });
    let left = env.slots();
    findings.expect(left == env.slot_name(), || {
        format!("slots after the re-copy: {left} (the temporary one should be gone)")
    });
    let route = route_record(env, &format!("public.{untouched}")).unwrap_or_default();
    findings.expect(route["published"] == published, || {
        format!("the {untouched} route should still record {published:?}: {route}")
    });
    findings.expect(route.get("phase").is_none(), || {
        format!("the {untouched} route was copied again: {route}")
    });
}

/// A row filter widened and narrowed while streaming: the stream follows the new filter at
/// once, the next start copies users again (alone) to the new published set.
fn a_changed_row_filter_streams_at_once_and_the_next_start_copies_the_table_again(shell: Shell) {
    let env = env_with_capture(
        "pubchg_filter",
        &setup(2_000, 300, "users WHERE (id % 3 <> 0), items"),
        schema(),
    );
    let mut findings = Findings::default();
    let mut connector = copied(&env, shell, TABLES, &[NO_LINGER], LONG);
    published_sets(
        &env,
        &mut findings,
        USERS_FIRST,
        ITEMS_WHOLE,
        "after the first copy",
    );
    first_copy_recorded(&env, &mut findings, "users", FIRST_FILTER);

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
    caught_up(&env, &connector, LONG);

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
    stopped(&mut connector, LONG);

    env.feldera.clear_captured_bodies();
    env.feldera.clear_requests();
    let (mut connector, users) = copied_again(&env, shell, "users", SECOND_FILTER);
    findings.expect(users["consistent_point"].is_string(), || {
        format!("the re-copied users route has no consistent point: {users}")
    });
    published_sets(
        &env,
        &mut findings,
        USERS_SECOND,
        ITEMS_WHOLE,
        "after the re-copy",
    );
    sent_only_to(&env, &mut findings, "users", "items");
    recopied_alone(
        &env,
        &mut findings,
        &connector,
        "users",
        "items",
        EVERYTHING,
        true,
    );

    // Both stream on, users through the new filter.
    env.sql(
        "INSERT INTO users VALUES (6000, 'after'), (6001, 'after, odd');
         UPDATE items SET qty = 0 WHERE sku = 1",
    );
    caught_up(&env, &connector, LONG);
    published_sets(
        &env,
        &mut findings,
        USERS_SECOND,
        ITEMS_WHOLE,
        "streaming on",
    );
    stopped(&mut connector, LONG);
    findings.finish(&connector);
}

/// A column list widened and narrowed back: each next start copies items again, with
/// `blob` as the publication publishes it then.
fn a_changed_column_list_copies_the_table_again_with_its_columns(shell: Shell) {
    let env = env_with_capture(
        "pubchg_columns",
        &setup(200, 500, "items (sku, qty), users"),
        schema(),
    );
    let mut findings = Findings::default();
    let mut connector = copied(&env, shell, TABLES, &[NO_LINGER], LONG);
    published_sets(
        &env,
        &mut findings,
        USERS_WHOLE,
        ITEMS_WITHOUT_BLOB,
        "after the first copy",
    );
    first_copy_recorded(&env, &mut findings, "items", WITHOUT_BLOB);
    findings.expect(env.feldera.bodies_containing(SECRET).is_empty(), || {
        "the first copy sent a value of blob, which the column list leaves out".to_owned()
    });

    // Widened while running: changes after it carry blob, rows Feldera holds keep NULL.
    env.sql("ALTER PUBLICATION pub SET TABLE items (sku, qty, blob), users");
    env.sql("UPDATE items SET qty = qty + 1000 WHERE sku <= 5");
    caught_up(&env, &connector, LONG);
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
    stopped(&mut connector, LONG);

    env.feldera.clear_captured_bodies();
    let (mut connector, _) = copied_again(&env, shell, "items", EVERYTHING);
    published_sets(
        &env,
        &mut findings,
        USERS_WHOLE,
        ITEMS_WHOLE,
        "after the widening re-copy",
    );
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
    caught_up(&env, &connector, LONG);
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
    stopped(&mut connector, LONG);

    env.feldera.clear_captured_bodies();
    let (mut connector, _) = copied_again(&env, shell, "items", WITHOUT_BLOB);
    published_sets(
        &env,
        &mut findings,
        USERS_WHOLE,
        ITEMS_WITHOUT_BLOB,
        "after the narrowing re-copy",
    );
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
    stopped(&mut connector, LONG);
    findings.finish(&connector);
}

/// The re-copy after a filter change crashes half way; the next start completes it.
fn a_crash_in_the_recopy_after_a_filter_change_is_copied_again(shell: Shell) {
    let env = env_with_capture(
        "pubchg_crash",
        &setup(20_000, 300, "users WHERE (id % 3 <> 0), items"),
        schema(),
    );
    let mut connector = copied(&env, shell, TABLES, &[NO_LINGER], LONG);
    stopped(&mut connector, LONG);
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
        TABLES,
        &[
            NO_LINGER,
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
    let (mut connector, _) = copied_again(&env, shell, "users", SECOND_FILTER);
    published_sets(
        &env,
        &mut findings,
        USERS_SECOND,
        ITEMS_WHOLE,
        "after the crash and the restart",
    );
    let items = env.ingress_rows_of("items");
    findings.expect(items == 3, || {
        format!("items should get only the 3 changes made while down, got {items} rows")
    });
    recopied_alone(
        &env,
        &mut findings,
        &connector,
        "users",
        "items",
        EVERYTHING,
        false,
    );
    stopped(&mut connector, LONG);
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
        schema(),
    );
    let mut findings = Findings::default();
    let mut connector = copied(&env, shell, TABLES, &[NO_LINGER], LONG);
    published_sets(
        &env,
        &mut findings,
        USERS_FIRST,
        ITEMS_EVEN,
        "after the first copy",
    );
    first_copy_recorded(&env, &mut findings, "users", FIRST_FILTER);
    first_copy_recorded(&env, &mut findings, "items", ITEMS_FIRST_FILTER);

    // Only items' filter changes; users' is given again as it was.
    env.sql("ALTER PUBLICATION pub SET TABLE users WHERE (id % 3 <> 0), items WHERE (sku % 5 = 0)");
    // 405 is in the new filter and not in the old one, 406 in the old one and not in the new
    // one; users streams on through its own filter: 999 is refused, 1000 published.
    env.sql(
        "INSERT INTO items VALUES (405, 1, 'new, fifth'), (406, 2, 'new, even');
         INSERT INTO users VALUES (999, 'new, third'), (1000, 'new, published')",
    );
    caught_up(&env, &connector, LONG);
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
    stopped(&mut connector, LONG);

    env.feldera.clear_captured_bodies();
    let (mut connector, items) = copied_again(&env, shell, "items", ITEMS_SECOND_FILTER);
    findings.expect(items["consistent_point"].is_string(), || {
        format!("the re-copied items route has no consistent point: {items}")
    });
    published_sets(
        &env,
        &mut findings,
        USERS_FIRST,
        ITEMS_FIFTHS,
        "after the re-copy",
    );
    sent_only_to(&env, &mut findings, "items", "users");
    recopied_alone(
        &env,
        &mut findings,
        &connector,
        "items",
        "users",
        FIRST_FILTER,
        true,
    );

    // Both stream on, items through its new filter.
    env.sql(
        "INSERT INTO items VALUES (500, 3, 'after'), (502, 4, 'after, even');
         UPDATE items SET qty = 0 WHERE sku IN (10, 12);
         UPDATE users SET name = 'after' WHERE id IN (1, 3)",
    );
    caught_up(&env, &connector, LONG);
    published_sets(
        &env,
        &mut findings,
        USERS_FIRST,
        ITEMS_FIFTHS,
        "streaming on",
    );
    stopped(&mut connector, LONG);
    findings.finish(&connector);
}

slotline_tests::both_shells!(
    a_changed_row_filter_streams_at_once_and_the_next_start_copies_the_table_again,
    a_changed_column_list_copies_the_table_again_with_its_columns,
    a_crash_in_the_recopy_after_a_filter_change_is_copied_again,
    a_changed_filter_of_the_second_route_copies_it_under_its_own_filter,
);
