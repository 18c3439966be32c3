//! End to end: starts slotline must refuse, and a stream it must stop.
//!
//! A refused start exits with its code (2: configuration, 1: contract), says why in the
//! log, and leaves nothing behind: every check runs before the slot is created. A table
//! that joins the publication without a route stops the stream (exit 1, naming it) before
//! anything of its transaction is acknowledged.

use serde_json::{json, Value};
use slotline_tests::e2e::{operation, Env, Shell};
use std::sync::OnceLock;
use std::time::Duration;

fn field(name: &str, ty: &str, nullable: bool) -> Value {
    json!({"name": name, "case_sensitive": false, "columntype": {"type": ty, "nullable": nullable}})
}

fn table(name: &str, key: Option<&str>, fields: Vec<Value>) -> Value {
    let mut t = json!({"name": name, "case_sensitive": false, "materialized": false,
                       "properties": {}, "fields": fields});
    if let Some(key) = key {
        // Feldera omits `primary_key` (rather than sending null) when there is none.
        t["primary_key"] = json!([key]);
    }
    t
}

fn users_table(key: Option<&str>) -> Value {
    table(
        "users",
        key,
        vec![field("id", "BIGINT", false), field("name", "VARCHAR", true)],
    )
}

fn schema(tables: Vec<Value>) -> Value {
    json!({"inputs": tables, "outputs": []})
}

const USERS: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text);";

/// Starts slotline on `env` with `extra`, and checks the refusal: the exit code, every
/// `needle` in the log, and no slot.
fn assert_refused(shell: Shell, env: &Env, extra: &[(&str, &str)], code: i32, needles: &[&str]) {
    let mut connector = env.start(shell, extra);
    let exit = connector.wait_exit(Duration::from_secs(60));
    let log = connector.log_text();
    assert_eq!(exit, Some(code), "{log}");
    for needle in needles {
        assert!(
            log.contains(needle),
            "the log does not say {needle:?}:\n{log}"
        );
    }
    assert!(
        !env.slot_exists(),
        "a refused start left slot {} behind",
        env.slot_name()
    );
}

/// Past what one Feldera ingress endpoint queues (docs/feldera.md, "Ingress"): a
/// configuration error naming the limit and why, before anything is asked of PostgreSQL or
/// Feldera.
fn bad_batch_max_rows(shell: Shell) {
    let setup = format!("{USERS} CREATE PUBLICATION pub FOR TABLE users;");
    let env = Env::new("badrows", &setup, schema(vec![users_table(Some("id"))]));
    assert_refused(
        shell,
        &env,
        &[("TABLES", "users"), ("BATCH_MAX_ROWS", "100001")],
        2,
        &[
            "BATCH_MAX_ROWS=\"100001\"",
            "from 1 to 100000",
            "Feldera pauses an ingress endpoint holding 100000 queued records",
        ],
    );
    assert!(
        env.feldera.requests().is_empty(),
        "a configuration error asks Feldera nothing"
    );
}

fn bad_tables_string(shell: Shell) {
    let setup = format!("{USERS} CREATE PUBLICATION pub FOR TABLE users;");
    let env = Env::new("badtables", &setup, schema(vec![users_table(Some("id"))]));
    assert_refused(
        shell,
        &env,
        &[("TABLES", "users,,items")],
        2,
        &["TABLES", "users,,items", "empty"],
    );
}

fn feldera_table_without_primary_key(shell: Shell) {
    let setup = format!("{USERS} CREATE PUBLICATION pub FOR TABLE users;");
    let env = Env::new("nokey", &setup, schema(vec![users_table(None)]));
    assert_refused(
        shell,
        &env,
        &[("TABLES", "users")],
        1,
        &["users", "no PRIMARY KEY", "FELDERA_REQUIRE_PRIMARY_KEY"],
    );
}

/// Types without a typed mapping, and a composite whose ROW members differ, are refused at
/// start in one message naming the table, each column, its type, the member, and what is
/// accepted instead (docs/guide/types.md, "From PostgreSQL types to Feldera columns").
fn unsupported_type_pairing(shell: Shell) {
    let setup = "CREATE TYPE mood AS ENUM ('sad', 'ok');
        CREATE TYPE addr AS (street text, zip int);
        CREATE TABLE shapes (id bigint PRIMARY KEY, p point, m mood, a addr);
        CREATE PUBLICATION pub FOR TABLE shapes;";
    let renamed = json!({"nullable": true, "fields": [
        {"name": "street", "type": "VARCHAR", "nullable": true, "precision": -1},
        {"name": "postcode", "type": "INTEGER", "nullable": true}]});
    let shapes = table(
        "shapes",
        Some("id"),
        vec![
            field("id", "BIGINT", false),
            field("p", "BIGINT", true),
            field("m", "INTEGER", true),
            json!({"name": "a", "case_sensitive": false, "columntype": renamed}),
        ],
    );
    let env = Env::new("pointtype", setup, schema(vec![shapes]));
    assert_refused(
        shell,
        &env,
        &[("TABLES", "shapes")],
        1,
        &[
            "cannot map PostgreSQL table public.shapes to Feldera table shapes",
            "column p -> p: PostgreSQL type point (base type) cannot be sent to a Feldera BIGINT column",
            "column m -> m: PostgreSQL type mood (enum) cannot be sent to a Feldera INTEGER column",
            "VARCHAR only (the text PostgreSQL prints); for another Feldera type, declare the \
             Feldera column VARCHAR and convert it in a Feldera view (CAST)",
            "column a -> a: PostgreSQL type addr (composite) cannot be sent to a Feldera \
             ROW(street VARCHAR, postcode INTEGER) column",
            "member zip has no ROW member of that name; ROW member postcode is not a member of addr",
        ],
    );
}

fn publication_missing_a_routed_table(shell: Shell) {
    let setup = format!(
        "{USERS} CREATE TABLE items (sku text PRIMARY KEY, qty int);
         CREATE PUBLICATION pub FOR TABLE users;"
    );
    let items = table(
        "items",
        Some("sku"),
        vec![
            field("sku", "VARCHAR", false),
            field("qty", "INTEGER", true),
        ],
    );
    let env = Env::new(
        "notpublished",
        &setup,
        schema(vec![users_table(Some("id")), items]),
    );
    let config = [("TABLES", "users,items")];
    assert_refused(
        shell,
        &env,
        &config,
        1,
        &["routed but not in publication pub: public.items"],
    );
    assert_run_gives_the_fix_check_gives(shell, &env.config(&config), "tables");
}

/// `check`'s fix for its failed finding about `item` (`FAIL <item> ... (fix: ...)`), and
/// a run with the same configuration: it exits 1 and its stderr has the same `(fix: ...)`.
fn assert_run_gives_the_fix_check_gives(shell: Shell, pairs: &[(String, String)], item: &str) {
    let check = operation(shell, pairs, &["check"]);
    assert_eq!(check.code, Some(1), "{check}");
    let line = check
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("FAIL {item} ")))
        .unwrap_or_else(|| panic!("check has no FAIL {item} line:\n{check}"));
    let fix = line
        .split_once(" (fix: ")
        .map(|(_, fix)| format!("(fix: {fix}"))
        .unwrap_or_else(|| panic!("check's finding has no fix: {line}"));
    let run = operation(shell, pairs, &[]);
    assert_eq!(run.code, Some(1), "{run}");
    let reason = run
        .stderr
        .lines()
        .find(|l| l.contains("exiting with code 1: "))
        .unwrap_or_else(|| panic!("the run says no reason:\n{run}"));
    assert!(
        reason.ends_with(&fix),
        "the run's reason does not end with check's {fix:?}:\n{reason}\n{check}"
    );
}

/// A role that logs in with a password only (SCRAM), above the cluster's trust lines.
const PASSWORD_ROLE: &str = "refusals_login";

/// A wrong password is refused at start (exit 1, PostgreSQL's 28P01) with the fix `check`
/// prints for it.
fn wrong_password(shell: Shell) {
    let setup = format!("{USERS} CREATE PUBLICATION pub FOR TABLE users;");
    let env = Env::new("badpassword", &setup, schema(vec![users_table(Some("id"))]));
    static ROLE: OnceLock<()> = OnceLock::new();
    ROLE.get_or_init(|| {
        env.pg.psql(
            "postgres",
            &format!(
                "SET password_encryption = 'scram-sha-256'; \
                 CREATE ROLE {PASSWORD_ROLE} LOGIN REPLICATION SUPERUSER PASSWORD 'right-one'"
            ),
        );
        env.pg.reconfigure(
            &format!("host all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n"),
            &[],
        );
    });
    let url = format!(
        "postgres://{PASSWORD_ROLE}@127.0.0.1:{}/{}",
        env.pg.port(),
        env.db
    );
    let config = [
        ("TABLES", "users"),
        ("PG_URL", url.as_str()),
        ("PGPASSWORD", "wrong-one"),
    ];
    assert_refused(shell, &env, &config, 1, &["28P01"]);
    assert_run_gives_the_fix_check_gives(shell, &env.config(&config), "postgres");
}

/// A routed table whose rows the role reads through row-level security is refused before
/// anything is created: a copy would read only the rows the policies show, while the
/// stream decodes every change (docs/snapshot.md, "Row-level security"). Once the role
/// bypasses it, the copy holds every row.
fn row_level_security(shell: Shell) {
    let setup = format!(
        "{USERS} INSERT INTO users SELECT g, 'user ' || g FROM generate_series(1, 10) g;
         ALTER TABLE users ENABLE ROW LEVEL SECURITY;
         CREATE POLICY even_only ON users FOR SELECT USING (id % 2 = 0);
         CREATE PUBLICATION pub FOR TABLE users;"
    );
    let env = Env::new("rls", &setup, schema(vec![users_table(Some("id"))]));
    let role = format!("rls_{}", env.name);
    env.sql(&format!(
        "CREATE ROLE {role} LOGIN REPLICATION; GRANT SELECT ON users TO {role}"
    ));
    let url = format!("postgres://{role}@127.0.0.1:{}/{}", env.pg.port(), env.db);
    let config = [
        ("TABLES", "users"),
        ("PG_URL", url.as_str()),
        ("SNAPSHOT_MODE", "initial"),
    ];
    assert_refused(
        shell,
        &env,
        &config,
        1,
        &[
            &format!(
                "routed table public.users has row-level security that applies to role \"{role}\""
            ),
            "a copy would read only the rows the role's policies show it",
            &format!("ALTER ROLE {role} BYPASSRLS"),
        ],
    );
    assert_run_gives_the_fix_check_gives(shell, &env.config(&config), "table public.users");
    assert_eq!(
        env.feldera.request_counts().get("ingress"),
        None,
        "nothing was sent to Feldera"
    );
    env.sql(&format!("ALTER ROLE {role} BYPASSRLS"));
    let mut connector = env.start(shell, &config);
    env.sql("INSERT INTO users VALUES (11, 'streamed')");
    let equal = slotline_tests::pg::wait_for(Duration::from_secs(60), || {
        (env.feldera.row_count("users") == Some(11)).then_some(())
    });
    assert!(equal.is_some(), "{}", connector.log_text());
    // `feldera_rows` orders its keys as text.
    assert_eq!(
        env.feldera_rows("users", "id"),
        env.pg_rows("users", "id::text")
    );
    connector.stop(Duration::from_secs(30));
}

/// A publication that does not exist is refused before the slot is created, naming the
/// publications the database has.
fn publication_that_does_not_exist(shell: Shell) {
    let setup = format!(
        "{USERS} CREATE PUBLICATION shop_pub FOR TABLE users;
         CREATE PUBLICATION audit_pub FOR TABLE users;"
    );
    let env = Env::new("nopub", &setup, schema(vec![users_table(Some("id"))]));
    assert_refused(
        shell,
        &env,
        &[("TABLES", "users")],
        1,
        &[
            "publication \"pub\" does not exist in this database, which has \"audit_pub\", \"shop_pub\"; set PG_PUBLICATION to one of them",
        ],
    );
    // None at all: said so.
    env.sql("DROP PUBLICATION shop_pub, audit_pub");
    assert_refused(
        shell,
        &env,
        &[("TABLES", "users")],
        1,
        &["publication \"pub\" does not exist: this database has no publication"],
    );
}

/// A pipeline Feldera does not have (HTTP 404) is refused before the slot is created,
/// naming the pipelines Feldera has.
fn pipeline_that_does_not_exist(shell: Shell) {
    let setup = format!("{USERS} CREATE PUBLICATION pub FOR TABLE users;");
    let env = Env::new("nopipeline", &setup, schema(vec![users_table(Some("id"))]));
    assert_refused(
        shell,
        &env,
        &[("TABLES", "users"), ("FELDERA_PIPELINE", "shop")],
        1,
        &[
            "HTTP 404 UnknownPipelineName",
            "Feldera has pipelines \"p\"; set FELDERA_PIPELINE to one of them",
        ],
    );
}

fn replica_identity_nothing(shell: Shell) {
    let setup = format!(
        "{USERS} ALTER TABLE users REPLICA IDENTITY NOTHING;
         CREATE PUBLICATION pub FOR TABLE users;"
    );
    let env = Env::new(
        "identnothing",
        &setup,
        schema(vec![users_table(Some("id"))]),
    );
    assert_refused(
        shell,
        &env,
        &[("TABLES", "users")],
        1,
        &["users", "REPLICA IDENTITY is NOTHING"],
    );
}

/// A table joins the publication while slotline streams, without a route: the first
/// change to it stops the stream, and its transaction stays in the slot.
fn unrouted_table_written_mid_stream(shell: Shell) {
    let setup = format!(
        "{USERS} CREATE TABLE audit (id bigint PRIMARY KEY, what text);
         CREATE PUBLICATION pub FOR TABLE users;"
    );
    let env = Env::new("unrouted", &setup, schema(vec![users_table(Some("id"))]));
    let mut connector = env.start(shell, &[("TABLES", "users"), ("BATCH_LINGER_MS", "0")]);
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "not streaming:\n{}",
        connector.log_text()
    );
    env.sql("INSERT INTO users VALUES (1, 'before')");
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "not caught up:\n{}",
        connector.log_text()
    );
    env.sql("ALTER PUBLICATION pub ADD TABLE audit");
    env.sql(
        "BEGIN; INSERT INTO users VALUES (2, 'with audit'); \
         INSERT INTO audit VALUES (1, 'unrouted'); COMMIT;",
    );
    let exit = connector.wait_exit(Duration::from_secs(60));
    let log = connector.log_text();
    assert_eq!(exit, Some(1), "{log}");
    assert!(
        log.contains("public.audit") && log.contains("not routed"),
        "the log does not name the unrouted table:\n{log}"
    );
    // Both rows of the offending transaction are still in the slot: nothing of it was
    // acknowledged, so a fixed configuration would replay it.
    assert_eq!(env.slot_pending_changes(), 2, "{log}");
    assert_eq!(
        env.feldera_rows("users", "id"),
        vec![json!({"id": 1, "name": "before"})]
    );
}

macro_rules! both_shells {
    ($($case:ident),* $(,)?) => {
        $(
            mod $case {
                use super::*;

                #[test]
                fn tokio() {
                    $case(Shell::Tokio);
                }

                #[test]
                fn blocking() {
                    $case(Shell::Blocking);
                }
            }
        )*
    };
}

both_shells!(
    bad_batch_max_rows,
    bad_tables_string,
    feldera_table_without_primary_key,
    unsupported_type_pairing,
    publication_missing_a_routed_table,
    wrong_password,
    row_level_security,
    publication_that_does_not_exist,
    pipeline_that_does_not_exist,
    replica_identity_nothing,
    unrouted_table_written_mid_stream,
);
