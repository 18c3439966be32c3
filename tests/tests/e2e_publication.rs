//! End to end: what the publication publishes, and nothing else (issue 31): row filters,
//! column lists and generated columns, against a real PostgreSQL and the Feldera double, in
//! both shells.
//!
//! - `FOR TABLE users WHERE (id % 3 <> 0), items (sku, qty, price)`: the initial copy, the
//!   stream (inserts on both sides of the filter, updates in place, key changes moving rows
//!   into and out of the filter, which PostgreSQL publishes as an INSERT and a DELETE,
//!   deletes on both sides, updates of the left-out `blob`) and a re-copy after the state
//!   file is removed (which must retract what Feldera holds outside the filter) all leave
//!   Feldera equal to the published set: users through the filter, items without `blob`
//!   (NULL in Feldera). Asserted on the bytes sent as well: no request body the double read
//!   ever holds a value of `items.blob` (all of them start with `SECRET-`).
//! - `slotline check` exits 0 and names the column list (the left-out `blob`) and the row
//!   filter (`((id % 3) <> 0)` as PostgreSQL prints it).
//! - A NOT NULL Feldera column the publication leaves out is refused at start: exit 1
//!   naming `blob`, and nothing sent.
//! - A stored generated column: published on PostgreSQL 18 with
//!   `publish_generated_columns = stored`, so Feldera's `b` is `a * 2` for copied and
//!   streamed rows alike; not published (no `publish_generated_columns`: before 18 there
//!   is none, from 18 it defaults to `none`), so `b` is NULL for copied and streamed rows
//!   alike. The copy must read what the stream will carry.
//!
//! The copy-and-stream scenarios collect their findings and report them all at the end, so
//! that one run tells every way the copy, the stream and the re-copy differ from the
//! published set.

mod publication_support;

use publication_support::{
    caught_up, column, copied, env_with_capture, feldera_equals, int, published_sets, start,
    stopped, table, varchar, Findings, SECRET,
};
use serde_json::{json, Value};
use slotline_tests::e2e::{shared_cluster, Env, Shell};
use slotline_tests::pg::wait_for;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(90);

/// What Feldera's users must hold: the rows the filter publishes.
const USERS_PUBLISHED: &str = "SELECT id, name, region FROM users WHERE id % 3 <> 0";
/// What Feldera's items must hold: the published columns, `blob` NULL.
const ITEMS_PUBLISHED: &str =
    "SELECT sku, qty, price::text AS price, NULL::text AS blob FROM items";

/// users(id, name, region) and items(sku, qty, price, blob), `blob` nullable or not.
fn schema(blob_nullable: bool) -> Value {
    let users = table(
        "users",
        "id",
        vec![
            column("id", int(false)),
            column("name", varchar(true)),
            column("region", varchar(true)),
        ],
    );
    let items = table(
        "items",
        "sku",
        vec![
            column("sku", int(false)),
            column("qty", int(true)),
            column(
                "price",
                json!({"type": "DECIMAL", "nullable": true, "precision": 10, "scale": 2}),
            ),
            column("blob", varchar(blob_nullable)),
        ],
    );
    json!({"inputs": [users, items], "outputs": []})
}

/// `users` rows and `items` rows (each `blob` a recognisable `SECRET-<sku>`), published
/// through a row filter and a column list.
fn setup(users: u32, items: u32) -> String {
    format!(
        "CREATE TABLE users (id int PRIMARY KEY, name text, region text);
         CREATE TABLE items (sku int PRIMARY KEY, qty int, price numeric(10,2), blob text);
         INSERT INTO users SELECT g, 'user ' || g, (ARRAY['eu', 'us', 'ap'])[1 + g % 3]
           FROM generate_series(1, {users}) g;
         INSERT INTO items SELECT g, g % 17, (g * 1.25)::numeric(10,2), '{SECRET}' || g
           FROM generate_series(1, {items}) g;
         CREATE PUBLICATION pub FOR TABLE users WHERE (id % 3 <> 0), items (sku, qty, price);"
    )
}

/// Both tables equal their published sets.
fn published_set(env: &Env, findings: &mut Findings, what: &str) {
    published_sets(env, findings, USERS_PUBLISHED, ITEMS_PUBLISHED, what);
}

/// No request body the double read so far holds a value of `items.blob`; and the check is
/// not vacuous: bodies of items were captured.
fn nothing_secret_sent(env: &Env, what: &str) -> Result<(), String> {
    let bodies = env.feldera.captured_bodies();
    if !bodies.iter().any(|b| b.path.contains("/ingress/items")) {
        return Err(format!(
            "{what}: the double captured no body for items ({} bodies in all)",
            bodies.len()
        ));
    }
    let leaked = env.feldera.bodies_containing(SECRET);
    let Some(first) = leaked.first() else {
        return Ok(());
    };
    let text = first.text();
    let at = text.find(SECRET).unwrap_or(0);
    let start = text[..at]
        .char_indices()
        .rev()
        .nth(120)
        .map_or(0, |(i, _)| i);
    let excerpt: String = text[start..].chars().take(240).collect();
    let count: usize = leaked
        .iter()
        .map(|b| b.text().matches(SECRET).count())
        .sum();
    Err(format!(
        "{what}: {} request bodies sent {count} value(s) of items.blob, which the publication \
         leaves out; the first, request {} to {}: ...{excerpt}...",
        leaked.len(),
        first.seq,
        first.path
    ))
}

/// Whether Feldera's `table` holds `row` exactly.
fn feldera_holds(env: &Env, table: &str, row: &Value) -> bool {
    env.feldera
        .table(table)
        .is_some_and(|t| t.rows.iter().any(|r| &r.row == row))
}

/// Copy, stream and re-copy of the filtered, column-listed publication.
fn copy_stream_and_recopy_send_only_what_is_published(shell: Shell) {
    let env = env_with_capture("pub_filter", &setup(3_000, 600), schema(true));
    let mut findings = Findings::default();
    let mut connector = copied(&env, shell, "users,items", &[], LONG);
    published_set(&env, &mut findings, "after the initial copy");
    findings.check(nothing_secret_sent(&env, "the initial copy"));

    // Inserts on both sides of the filter: 3001 and 3007 are published, 3003 and 3006 not.
    env.sql(
        "INSERT INTO users VALUES (3001, 'new', 'eu'), (3003, 'new, filtered out', 'us'),
           (3006, 'new, filtered out', 'ap'), (3007, 'new', 'eu')",
    );
    // Updates in place, of published rows and of rows outside the filter (id 51, 351, ...).
    env.sql("UPDATE users SET name = name || ' (renamed)', region = 'moved' WHERE id % 50 = 1");
    // Key changes. 4 -> 10004 stays in, 5 -> 10005 leaves (a DELETE of 5), 6 -> 10006
    // enters (an INSERT of 10006), 9 -> 10008 stays out (nothing published); and 100..130
    // -> +20000: id % 3 = 1 leaves, 2 stays in, 0 enters.
    env.sql(
        "BEGIN;
         UPDATE users SET id = 10004 WHERE id = 4;
         UPDATE users SET id = 10005, name = 'left the filter' WHERE id = 5;
         UPDATE users SET id = 10006, name = 'entered the filter' WHERE id = 6;
         UPDATE users SET id = 10008 WHERE id = 9;
         COMMIT",
    );
    env.sql("UPDATE users SET id = id + 20000 WHERE id BETWEEN 100 AND 130");
    // Deletes on both sides of the filter.
    env.sql("DELETE FROM users WHERE id BETWEEN 200 AND 220 OR id IN (3003, 3007)");
    // items: updates of the left-out column alone, with a published one, an insert, a key
    // change and a delete; every blob written is a secret too.
    env.sql(&format!(
        "UPDATE items SET blob = '{SECRET}updated-' || sku WHERE sku <= 50;
         UPDATE items SET qty = qty + 100, blob = '{SECRET}both-' || sku WHERE sku BETWEEN 51 AND 60;
         INSERT INTO items VALUES (1001, 5, 9.99, '{SECRET}new-1001'), (1002, 6, 0.50, NULL);
         UPDATE items SET sku = 5599, blob = '{SECRET}moved' WHERE sku = 599;
         DELETE FROM items WHERE sku = 600"
    ));
    caught_up(&env, &connector, LONG);
    published_set(&env, &mut findings, "after streaming");
    findings.check(nothing_secret_sent(&env, "the copy and the stream"));
    stopped(&mut connector, LONG);

    // A re-copy, with Feldera holding rows outside the filter (ids that are multiples of
    // 3: two PostgreSQL has outside the filter, one it lacks) and an item with a stale blob.
    let ghosts = [
        json!({"id": 3, "name": "ghost", "region": "x"}),
        json!({"id": 99, "name": "ghost", "region": "x"}),
        json!({"id": 999_999, "name": "ghost", "region": "x"}),
    ];
    env.ingest("users", &ghosts);
    let stale = json!({"sku": 1, "qty": 1, "price": "1.25", "blob": "stale"});
    env.ingest("items", std::slice::from_ref(&stale));
    let pushed = || {
        ghosts.iter().all(|g| feldera_holds(&env, "users", g))
            && feldera_holds(&env, "items", &stale)
    };
    assert!(
        wait_for(LONG, || pushed().then_some(())).is_some(),
        "the double did not process the rows pushed into it"
    );
    std::fs::remove_file(env.state_path()).expect("remove the state file");
    let mut connector = copied(&env, shell, "users,items", &[], LONG);
    let outside: Vec<Value> = env
        .feldera_rows("users", "id")
        .into_iter()
        .filter(|r| r["id"].as_i64().is_some_and(|id| id % 3 == 0))
        .collect();
    findings.expect(outside.is_empty(), || {
        format!(
            "after the re-copy: Feldera's users still holds {} row(s) outside the filter, e.g. {}",
            outside.len(),
            outside[0]
        )
    });
    published_set(&env, &mut findings, "after the re-copy");
    findings.check(nothing_secret_sent(
        &env,
        "the copy, the stream and the re-copy",
    ));
    stopped(&mut connector, LONG);
    findings.finish(&connector);
}

/// `slotline check` names the column list and the row filter, and passes.
fn check_names_the_column_list_and_the_row_filter(shell: Shell) {
    let env = Env::new("pub_check", &setup(30, 10), schema(true));
    let out = slotline_tests::e2e::operation(
        shell,
        &env.config(&[("TABLES", "users,items"), ("SNAPSHOT_MODE", "initial")]),
        &["check"],
    );
    assert_eq!(out.code, Some(0), "check passes:\n{out}");
    let text = format!("{}{}", out.stdout, out.stderr);
    let unnamed: Vec<&str> = [
        ("blob", "the column items' column list leaves out"),
        ("id % 3", "users' row filter, ((id % 3) <> 0)"),
    ]
    .into_iter()
    .filter(|(needle, _)| !text.contains(needle))
    .map(|(_, what)| what)
    .collect();
    assert!(
        unnamed.is_empty(),
        "check does not name {}:\n{out}",
        unnamed.join(", nor ")
    );
}

/// A NOT NULL Feldera column the publication does not publish cannot be fed: refused at
/// start, before anything is copied.
fn a_not_null_column_the_publication_leaves_out_is_refused(shell: Shell) {
    let env = env_with_capture("pub_notnull", &setup(300, 60), schema(false));
    let mut connector = start(&env, shell, "users,items", &[]);
    // Exited, or (not refused) got as far as a complete copy.
    let exited = wait_for(LONG, || {
        if !connector.is_running() {
            return Some(true);
        }
        (env.state_phase().as_deref() == Some("complete")).then_some(false)
    });
    assert_eq!(
        exited,
        Some(true),
        "the connector was not refused at start (it copied):\n{}",
        connector.log_text()
    );
    let code = connector.wait_exit(Duration::ZERO);
    let log = connector.log_text();
    assert_eq!(code, Some(1), "exit 1:\n{log}");
    assert!(log.contains("blob"), "the refusal names blob:\n{log}");
    let sent: Vec<String> = env
        .feldera
        .captured_bodies()
        .into_iter()
        .filter(|b| b.path.contains("/ingress/"))
        .map(|b| b.path)
        .collect();
    assert!(sent.is_empty(), "nothing is copied, but it sent {sent:?}");
    assert_eq!(env.feldera_count("users") + env.feldera_count("items"), 0);
}

/// The server's major version (`server_version_num` / 10000).
fn server_major() -> u32 {
    let num: u32 = shared_cluster()
        .psql("postgres", "SHOW server_version_num")
        .parse()
        .expect("server_version_num is a number");
    num / 10_000
}

/// g(id, a, b = a * 2 stored), 300 rows, published with `with`.
fn generated_setup(with: &str) -> String {
    format!(
        "CREATE TABLE g (id int PRIMARY KEY, a int, b int GENERATED ALWAYS AS (a * 2) STORED);
         INSERT INTO g (id, a) SELECT x, x * 7 FROM generate_series(1, 300) x;
         CREATE PUBLICATION pub FOR TABLE g {with};"
    )
}

fn generated_schema() -> Value {
    let g = table(
        "g",
        "id",
        vec![
            column("id", int(false)),
            column("a", int(true)),
            column("b", int(true)),
        ],
    );
    json!({"inputs": [g], "outputs": []})
}

/// Whether `GENERATED_CHANGES` wrote the row of g with this id (inserted it, updated it in
/// place or moved it by a key change), rather than only the copy.
fn written_by_the_stream(id: i64) -> bool {
    id > 300 || id % 10 == 0
}

/// Inserts (one with a NULL `a`), updates of `a`, key changes and deletes of g.
const GENERATED_CHANGES: &str =
    "INSERT INTO g (id, a) SELECT x, x + 1 FROM generate_series(1001, 1100) x;
     INSERT INTO g (id, a) VALUES (2000, NULL);
     UPDATE g SET a = a + 100 WHERE id % 10 = 0;
     UPDATE g SET id = id + 5000, a = -a WHERE id % 10 = 3;
     DELETE FROM g WHERE id % 10 = 5";

/// Feldera's g rows whose `b` is not `expected(a)`.
fn wrong_b(env: &Env, expected: impl Fn(&Value) -> Value) -> Vec<Value> {
    env.feldera_rows("g", "id")
        .into_iter()
        .filter(|r| r["b"] != expected(&r["a"]))
        .collect()
}

fn twice(a: &Value) -> Value {
    a.as_i64().map_or(Value::Null, |a| json!(a * 2))
}

fn null(_: &Value) -> Value {
    Value::Null
}

/// Checks g in Feldera: every `b` as `expected` says, and the whole table equal to `query`.
fn generated_holds(
    env: &Env,
    findings: &mut Findings,
    query: &str,
    expected: impl Fn(&Value) -> Value,
    what: &str,
) {
    let wrong = wrong_b(env, expected);
    findings.check(match wrong.first() {
        None => Ok(()),
        Some(first) => Err(format!(
            "{what}: {} row(s) of g have the wrong b, e.g. {first}",
            wrong.len()
        )),
    });
    findings.check(feldera_equals(env, "g", "id", query, what));
}

/// PostgreSQL 18, `publish_generated_columns = stored`: b = a * 2 in every row, copied or
/// streamed.
fn a_published_generated_column_is_copied_and_streamed(shell: Shell) {
    let major = server_major();
    if major < 18 {
        eprintln!(
            "skipped: PostgreSQL {major} cannot publish generated columns \
             (publish_generated_columns is new in 18)"
        );
        return;
    }
    let env = Env::new(
        "pub_gen_stored",
        &generated_setup("WITH (publish_generated_columns = stored)"),
        generated_schema(),
    );
    let mut findings = Findings::default();
    let mut connector = copied(&env, shell, "g", &[], LONG);
    let published = "SELECT id, a, b FROM g";
    generated_holds(&env, &mut findings, published, twice, "after the copy");
    env.sql(GENERATED_CHANGES);
    caught_up(&env, &connector, LONG);
    let streamed: Vec<Value> = wrong_b(&env, twice)
        .into_iter()
        .filter(|r| r["id"].as_i64().is_some_and(written_by_the_stream))
        .collect();
    findings.check(match streamed.first() {
        None => Ok(()),
        Some(first) => Err(format!(
            "the stream: {} row(s) it wrote have the wrong b, e.g. {first}",
            streamed.len()
        )),
    });
    generated_holds(&env, &mut findings, published, twice, "after streaming");
    stopped(&mut connector, LONG);
    findings.finish(&connector);
}

/// No `publish_generated_columns` (before 18 there is none; from 18 the default is
/// `none`): b is not published, so NULL in every row, copied or streamed.
fn an_unpublished_generated_column_is_null_in_copy_and_stream(shell: Shell) {
    let env = Env::new("pub_gen_none", &generated_setup(""), generated_schema());
    let mut findings = Findings::default();
    let mut connector = copied(&env, shell, "g", &[], LONG);
    let published = "SELECT id, a, NULL::int AS b FROM g";
    generated_holds(&env, &mut findings, published, null, "after the copy");
    env.sql(GENERATED_CHANGES);
    caught_up(&env, &connector, LONG);
    generated_holds(&env, &mut findings, published, null, "after streaming");
    stopped(&mut connector, LONG);
    findings.finish(&connector);
}

slotline_tests::both_shells!(
    copy_stream_and_recopy_send_only_what_is_published,
    check_names_the_column_list_and_the_row_filter,
    a_not_null_column_the_publication_leaves_out_is_refused,
    a_published_generated_column_is_copied_and_streamed,
    an_unpublished_generated_column_is_null_in_copy_and_stream,
);
