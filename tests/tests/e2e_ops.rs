//! End to end: the operator's commands (`check`, `status`, `drop-slot`) and the metrics
//! server, against a real PostgreSQL and the Feldera double, in both shells.
//!
//! `check` against a correct setup prints only green lines and exits 0; against a broken
//! one (no publication, a table whose key the replica identity cannot carry, a Feldera
//! column of another type, a paused pipeline; and on a second cluster `wal_level =
//! replica`) it prints one line per problem, each with its fix, and exits 1. Neither
//! creates a slot. `/metrics` values move as rows flow.

use serde_json::{json, Value};
use slotline_tests::e2e::{operation, Connector, Env, Outcome, Shell};
use slotline_tests::feldera_double::DoubleConfig;
use slotline_tests::pg::{wait_for, ClusterOptions, PgCluster};
use std::time::Duration;

fn field(name: &str, ty: &str, nullable: bool) -> Value {
    json!({"name": name, "case_sensitive": false, "columntype": {"type": ty, "nullable": nullable}})
}

fn table(name: &str, key: &str, fields: Vec<Value>) -> Value {
    json!({"name": name, "case_sensitive": false, "materialized": false, "properties": {},
           "primary_key": [key], "fields": fields})
}

/// The demo's shape: users and items, both keyed in PostgreSQL and in Feldera.
const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text);
     CREATE TABLE items (sku text PRIMARY KEY, qty int);
     CREATE PUBLICATION pub FOR TABLE users, items;";

fn schema(qty_type: &str) -> Value {
    json!({"inputs": [
        table("users", "id", vec![field("id", "BIGINT", false), field("name", "VARCHAR", true)]),
        table("items", "sku", vec![field("sku", "VARCHAR", false), field("qty", qty_type, true)]),
    ], "outputs": []})
}

fn with(env: &Env, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    env.config(&[&[("TABLES", "users,items")], extra].concat())
}

fn fail_lines(out: &Outcome) -> Vec<&str> {
    out.stdout
        .lines()
        .filter(|l| l.starts_with("FAIL"))
        .collect()
}

/// A report that exited 0 is the last thing the operator sees: no timestamped
/// "exiting with code 0" line on stderr after it, at the default log level.
fn assert_report_is_the_last_word(out: &Outcome) {
    assert_eq!(out.code, Some(0), "{out}");
    assert!(!out.stdout.is_empty(), "a report on stdout: {out}");
    assert!(
        !out.stderr.contains("exiting with code"),
        "a log line after the report: {out}"
    );
}

fn check_of_a_correct_setup_is_all_green(shell: Shell) {
    let env = Env::new("checkok", SETUP, schema("INTEGER"));
    for mode in ["never", "initial"] {
        let out = operation(shell, &with(&env, &[("SNAPSHOT_MODE", mode)]), &["check"]);
        assert_eq!(out.code, Some(0), "{out}");
        assert!(fail_lines(&out).is_empty(), "{out}");
        assert!(out.stdout.ends_with("check: all good\n"), "{out}");
        assert_report_is_the_last_word(&out);
        for item in [
            "postgres",
            "server",
            "wal_level",
            "role",
            "publication",
            "tables",
            "table public.users",
            "table public.items",
            "feldera pipeline",
            "feldera queries",
            "slot",
            "start",
        ] {
            assert!(
                out.stdout
                    .lines()
                    .any(|l| l.starts_with(&format!("ok   {item} "))),
                "no green line for {item}:\n{out}"
            );
        }
    }
    assert!(!env.slot_exists(), "check created the slot");
    // The reason is still there for whoever asks for DEBUG.
    let debug = operation(shell, &with(&env, &[("RUST_LOG", "debug")]), &["check"]);
    assert!(
        debug
            .stderr
            .lines()
            .any(|l| l.contains("DEBUG") && l.contains("exiting with code 0: ")),
        "{debug}"
    );
    let out = operation(shell, &with(&env, &[]), &["check", "--json"]);
    assert_report_is_the_last_word(&out);
    let report: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(report["ok"], json!(true), "{out}");
}

fn check_of_a_broken_setup_prints_one_line_per_problem(shell: Shell) {
    // No publication; items without a primary key (the replica identity carries no key);
    // Feldera's qty is a DATE; the pipeline is paused.
    let setup = "CREATE TABLE users (id bigint PRIMARY KEY, name text);
         CREATE TABLE items (sku text NOT NULL, qty int);";
    let env = Env::new("checkbad", setup, schema("DATE"));
    env.feldera.pause();
    let out = operation(shell, &with(&env, &[]), &["check"]);
    assert_eq!(out.code, Some(1), "{out}");
    let failures = fail_lines(&out);
    for (what, needle) in [
        ("no publication", "publication \"pub\" does not exist"),
        ("missing key", "items"),
        ("schema mismatch", "qty"),
        ("paused pipeline", "is Paused, not Running"),
    ] {
        assert!(
            failures.iter().any(|l| l.contains(needle)),
            "{what}: no FAIL line with {needle:?}:\n{out}"
        );
    }
    assert!(failures.iter().all(|l| l.contains("(fix: ")), "{out}");
    let distinct: std::collections::BTreeSet<&&str> = failures.iter().collect();
    assert_eq!(
        distinct.len(),
        failures.len(),
        "a problem printed twice:\n{out}"
    );
    assert!(!env.slot_exists(), "check created the slot");
    env.feldera.resume();
}

fn check_of_a_missing_publication_lists_the_existing_ones(shell: Shell) {
    let setup = format!("{SETUP} CREATE PUBLICATION audit_pub FOR TABLE users;");
    let env = Env::new("checknopub", &setup, schema("INTEGER"));
    let out = operation(
        shell,
        &with(&env, &[("PG_PUBLICATION", "shop")]),
        &["check"],
    );
    assert_eq!(out.code, Some(1), "{out}");
    let failures = fail_lines(&out);
    assert!(
        failures.iter().any(|l| l.starts_with("FAIL publication")
            && l.contains("publication \"shop\" does not exist in this database, which has \"audit_pub\", \"pub\"; set PG_PUBLICATION to one of them")),
        "{out}"
    );
    assert!(!env.slot_exists(), "check created the slot");
}

fn check_of_a_missing_pipeline_lists_the_existing_ones(shell: Shell) {
    let env = Env::new("checknopipe", SETUP, schema("INTEGER"));
    let out = operation(
        shell,
        &with(&env, &[("FELDERA_PIPELINE", "shop")]),
        &["check"],
    );
    assert_eq!(out.code, Some(1), "{out}");
    let failures = fail_lines(&out);
    assert!(
        failures.iter().any(|l| l.starts_with("FAIL feldera ")
            && l.contains("HTTP 404 UnknownPipelineName")
            && l.contains("Feldera has pipelines \"p\"; set FELDERA_PIPELINE to one of them")),
        "{out}"
    );
    // PostgreSQL's findings are all there still.
    assert!(out.stdout.contains("ok   publication "), "{out}");
    assert!(!env.slot_exists(), "check created the slot");
}

fn status_of_a_missing_pipeline_lists_the_existing_ones(shell: Shell) {
    let env = Env::new("statusnopipe", SETUP, schema("INTEGER"));
    let out = operation(
        shell,
        &with(&env, &[("FELDERA_PIPELINE", "shop")]),
        &["status"],
    );
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        fail_lines(&out)
            .iter()
            .any(|l| l.starts_with("FAIL feldera ")
                && l.contains("HTTP 404")
                && l.contains("Feldera has pipelines \"p\"; set FELDERA_PIPELINE to one of them")),
        "{out}"
    );
}

fn check_on_wal_level_replica_names_it(shell: Shell) {
    let cluster = replica_cluster();
    let db = cluster.create_database(&format!("walrep_{}", shell.binary_name().replace('-', "_")));
    cluster.psql(&db, SETUP);
    let double = slotline_tests::feldera_double::FelderaDouble::start(DoubleConfig::new(
        "p",
        schema("INTEGER"),
    ))
    .expect("double");
    let state = std::env::temp_dir().join(format!(
        "slotline-walrep-{}-{}",
        shell.binary_name(),
        std::process::id()
    ));
    let pairs: Vec<(String, String)> = [
        ("PG_URL", cluster.url(&db)),
        ("PG_PUBLICATION", "pub".into()),
        ("TABLES", "users,items".into()),
        ("FELDERA_URL", double.base_url()),
        ("FELDERA_PIPELINE", "p".into()),
        ("SNAPSHOT_MODE", "never".into()),
        ("STATE_DIR", state.display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let out = operation(shell, &pairs, &["check"]);
    assert_eq!(out.code, Some(1), "{out}");
    let failures = fail_lines(&out);
    let wal: Vec<&&str> = failures
        .iter()
        .filter(|l| l.contains("wal_level is replica"))
        .collect();
    assert_eq!(wal.len(), 1, "{out}");
    assert!(
        wal[0].contains("(fix: ALTER SYSTEM SET wal_level = logical"),
        "{out}"
    );
    // A start is refused by the server when it creates the slot: the same fix, and no
    // state file left behind (there is no copy to record), so the next check does not
    // warn of a copy that never happened.
    let initial: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| match k.as_str() {
            "SNAPSHOT_MODE" => (k.clone(), "initial".to_owned()),
            _ => (k.clone(), v.clone()),
        })
        .collect();
    let mut connector = Connector::spawn(shell, &initial, &db);
    assert_eq!(
        connector.wait_exit(Duration::from_secs(60)),
        Some(1),
        "{}",
        connector.log_text()
    );
    let log = connector.log_text();
    assert!(
        log.contains("(fix: ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL)"),
        "{log}"
    );
    let files: Vec<_> = std::fs::read_dir(&state)
        .map(|dir| dir.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(files.is_empty(), "state written: {files:?}\n{log}");
    let again = operation(shell, &initial, &["check"]);
    assert!(!again.stdout.contains("pending"), "{again}");
    let _ = std::fs::remove_dir_all(&state);
}

/// A second throwaway cluster with `wal_level = replica`, shared by this binary's tests.
fn replica_cluster() -> &'static PgCluster {
    static CLUSTER: std::sync::OnceLock<PgCluster> = std::sync::OnceLock::new();
    CLUSTER.get_or_init(|| {
        PgCluster::start_with(ClusterOptions::default().setting("wal_level", "replica"))
    })
}

fn status_and_drop_slot(shell: Shell) {
    let env = Env::new("opsslot", SETUP, schema("INTEGER"));
    let extra = [("BATCH_LINGER_MS", "0")];
    let mut connector = env.start(shell, &[&[("TABLES", "users,items")][..], &extra].concat());
    assert!(
        connector.wait_log("streaming from slot", Duration::from_secs(60)),
        "{}",
        connector.log_text()
    );
    env.sql("INSERT INTO users VALUES (1, 'a'), (2, 'b')");
    assert!(env.wait_caught_up(Duration::from_secs(30)));

    let out = operation(shell, &with(&env, &[]), &["status", "--json"]);
    assert_eq!(out.code, Some(0), "{out}");
    let status: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(status["slot"]["exists"], json!(true), "{out}");
    assert_eq!(status["slot"]["active"], json!(true), "{out}");
    assert_eq!(status["slot"]["wal_status"], json!("reserved"), "{out}");
    assert!(status["slot"]["lag_bytes"].as_u64().is_some(), "{out}");
    assert!(
        status["slot"]["retained_wal_bytes"].as_u64().is_some(),
        "{out}"
    );
    // The slot moves with idle keepalives (other databases write WAL): only its shape.
    assert!(
        status["slot"]["confirmed_flush_lsn"]
            .as_str()
            .is_some_and(|l| l.contains('/')),
        "{out}"
    );
    assert_eq!(
        status["feldera"]["deployment_status"],
        json!("Running"),
        "{out}"
    );
    let text = operation(shell, &with(&env, &[]), &["status"]);
    assert_report_is_the_last_word(&text);
    assert!(
        text.stdout.contains("active (PostgreSQL backend pid "),
        "{text}"
    );

    let refused = operation(shell, &with(&env, &[]), &["drop-slot"]);
    assert_eq!(refused.code, Some(2), "{refused}");
    assert!(refused.stdout.contains("without --yes"), "{refused}");
    let busy = operation(shell, &with(&env, &[]), &["drop-slot", "--yes"]);
    assert_eq!(busy.code, Some(1), "{busy}");
    assert!(
        busy.stdout.contains("is in use by PostgreSQL backend pid"),
        "{busy}"
    );
    assert!(env.slot_exists());

    assert_eq!(
        connector.stop(Duration::from_secs(30)),
        Some(0),
        "{}",
        connector.log_text()
    );
    // Retiring a connector needs only the connection and the slot: no publication, no
    // tables, no pipeline.
    let bare: Vec<(String, String)> = env
        .config(&[])
        .into_iter()
        .filter(|(k, _)| ["PG_URL", "PG_SLOT", "STATE_DIR"].contains(&k.as_str()))
        .collect();
    assert_eq!(bare.len(), 3, "{bare:?}");
    let status = operation(shell, &bare, &["status", "--json"]);
    assert_report_is_the_last_word(&status);
    let report: Value =
        serde_json::from_str(&status.stdout).unwrap_or_else(|e| panic!("{e}: {status}"));
    assert_eq!(report["slot"]["exists"], json!(true), "{status}");
    assert_eq!(report["slot"]["active"], json!(false), "{status}");
    assert!(
        status
            .stdout
            .contains("not asked: FELDERA_PIPELINE is not set"),
        "{status}"
    );
    std::fs::create_dir_all(&env.state_dir).unwrap();
    let state = env
        .state_dir
        .join(format!("{}.state.json", env.slot_name()));
    std::fs::write(&state, "{}").unwrap();
    let dropped = operation(shell, &bare, &["drop-slot", "--yes"]);
    assert_report_is_the_last_word(&dropped);
    assert!(
        dropped.stdout.contains("dropped replication slot"),
        "{dropped}"
    );
    assert!(dropped.stdout.contains("removed"), "{dropped}");
    assert!(!env.slot_exists());
    assert!(!state.exists());
    let gone = operation(shell, &with(&env, &[]), &["status"]);
    assert_eq!(gone.code, Some(0), "{gone}");
    assert!(gone.stdout.contains("does not exist"), "{gone}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn get(url: &str) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    match agent.get(url).call() {
        Ok(mut resp) => (
            resp.status().as_u16(),
            resp.body_mut().read_to_string().unwrap_or_default(),
        ),
        Err(e) => (0, e.to_string()),
    }
}

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn metrics_move_as_rows_flow(shell: Shell) {
    let env = Env::new("metrics", SETUP, schema("INTEGER"));
    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    let extra = [
        ("TABLES", "users,items"),
        ("METRICS_ADDR", addr.as_str()),
        ("SLOT_CHECK_INTERVAL_MS", "200"),
        ("BATCH_LINGER_MS", "0"),
    ];
    let connector = env.start(shell, &extra);
    let healthy = wait_for(Duration::from_secs(30), || {
        (get(&format!("{base}/healthz")).0 == 200).then_some(())
    });
    assert!(healthy.is_some(), "{}", connector.log_text());
    let ready = wait_for(Duration::from_secs(60), || {
        (get(&format!("{base}/readyz")).0 == 200).then_some(())
    });
    assert!(
        ready.is_some(),
        "{:?}\n{}",
        get(&format!("{base}/readyz")),
        connector.log_text()
    );
    let before = get(&format!("{base}/metrics")).1;
    assert_eq!(
        metric(&before, "slotline_rows_sent_total"),
        Some(0.0),
        "{before}"
    );
    assert_eq!(
        metric(&before, "slotline_phase{phase=\"streaming\"}"),
        Some(1.0),
        "{before}"
    );
    let flushed_before = metric(&before, "slotline_flushed_lsn").expect("flushed lsn");

    env.sql("INSERT INTO users SELECT g, 'n' FROM generate_series(1, 50) g");
    env.sql("INSERT INTO items VALUES ('a', 1)");
    assert!(env.wait_caught_up(Duration::from_secs(30)));
    let after = wait_for(Duration::from_secs(10), || {
        let text = get(&format!("{base}/metrics")).1;
        (metric(&text, "slotline_rows_sent_total") == Some(51.0)
            && metric(&text, "slotline_batches_in_flight") == Some(0.0)
            && metric(&text, "slotline_server_wal_lsn").is_some())
        .then_some(text)
    })
    .unwrap_or_else(|| get(&format!("{base}/metrics")).1);
    assert_eq!(
        metric(&after, "slotline_rows_sent_total"),
        Some(51.0),
        "{after}"
    );
    assert!(
        metric(&after, "slotline_flushed_lsn").unwrap() > flushed_before,
        "{after}"
    );
    assert!(
        metric(&after, "slotline_received_lsn").unwrap()
            >= metric(&after, "slotline_flushed_lsn").unwrap(),
        "{after}"
    );
    // Both inserts may share one batch (one request per table) or not: at least one batch
    // and one completion wait, and the two tables' requests.
    assert!(
        metric(&after, "slotline_batches_durable_total").unwrap() >= 1.0,
        "{after}"
    );
    assert!(
        metric(&after, "slotline_ingress_requests_total").unwrap() >= 2.0,
        "{after}"
    );
    assert!(
        metric(&after, "slotline_completion_wait_seconds_count").unwrap() >= 1.0,
        "{after}"
    );
    assert!(
        metric(&after, "slotline_commit_to_durable_seconds_count").unwrap() >= 1.0,
        "{after}"
    );
    assert_eq!(
        metric(&after, "slotline_batches_in_flight"),
        Some(0.0),
        "{after}"
    );
    assert!(
        metric(&after, "slotline_slot_retained_wal_bytes").is_some(),
        "{after}"
    );
    assert!(metric(&after, "slotline_lag_bytes").is_some(), "{after}");
    assert_eq!(
        metric(&after, "slotline_reconnects_total"),
        Some(0.0),
        "{after}"
    );
    assert!(
        after.contains("# TYPE slotline_completion_wait_seconds histogram"),
        "{after}"
    );
    assert_eq!(get(&format!("{base}/nothing")).0, 404);
    drop(connector);
}

fn readyz_is_503_until_streaming_and_reconnects_are_counted(shell: Shell) {
    let env = Env::new("notready", SETUP, schema("INTEGER"));
    env.feldera.set_unavailable(None);
    let addr = format!("127.0.0.1:{}", free_port());
    let base = format!("http://{addr}");
    let extra = [("TABLES", "users,items"), ("METRICS_ADDR", addr.as_str())];
    let connector = env.start(shell, &extra);
    let backing_off = wait_for(Duration::from_secs(30), || {
        let text = get(&format!("{base}/metrics")).1;
        (metric(&text, "slotline_reconnects_total").is_some_and(|r| r >= 1.0)).then_some(text)
    });
    let text =
        backing_off.unwrap_or_else(|| panic!("no reconnect counted\n{}", connector.log_text()));
    assert!(
        metric(&text, "slotline_backoff_attempt").is_some(),
        "{text}"
    );
    let (code, body) = get(&format!("{base}/readyz"));
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("not streaming"), "{body}");
    assert_eq!(get(&format!("{base}/healthz")).0, 200);
    env.feldera.clear_unavailable();
    let ready = wait_for(Duration::from_secs(60), || {
        (get(&format!("{base}/readyz")).0 == 200).then_some(())
    });
    assert!(ready.is_some(), "{}", connector.log_text());
}

/// An environment and a connector that serves metrics and is streaming; the metrics' base
/// URL.
fn streaming_with_metrics(name: &str, shell: Shell) -> (Env, Connector, String) {
    let env = Env::new(name, SETUP, schema("INTEGER"));
    let addr = format!("127.0.0.1:{}", free_port());
    let extra = [
        ("TABLES", "users,items"),
        ("METRICS_ADDR", addr.as_str()),
        ("BATCH_LINGER_MS", "0"),
    ];
    let connector = env.start(shell, &extra);
    assert!(
        connector.wait_log("streaming from slot", Duration::from_secs(60)),
        "{}",
        connector.log_text()
    );
    (env, connector, format!("http://{addr}"))
}

/// A scrape sees the core's state as of at most one publish window (100 ms) ago, also on a
/// quiet stream where no input follows the change for seconds: `/readyz` right after the
/// log says streaming, and the rows counter right after Feldera got the row.
fn a_scrape_200_ms_after_a_change_sees_it(shell: Shell) {
    let (env, connector, base) = streaming_with_metrics("scrape", shell);
    std::thread::sleep(Duration::from_millis(200));
    let (code, body) = get(&format!("{base}/readyz"));
    assert_eq!(code, 200, "{body}\n{}", connector.log_text());
    // Everything the start sent is settled: the next change is alone on a quiet stream.
    std::thread::sleep(Duration::from_millis(500));
    env.sql("INSERT INTO users VALUES (1, 'one')");
    assert!(
        wait_for(Duration::from_secs(30), || (env.feldera_count("users")
            == 1)
            .then_some(()))
        .is_some(),
        "{}",
        connector.log_text()
    );
    std::thread::sleep(Duration::from_millis(200));
    let text = get(&format!("{base}/metrics")).1;
    assert_eq!(
        metric(&text, "slotline_rows_sent_total"),
        Some(1.0),
        "{text}\n{}",
        connector.log_text()
    );
    drop(connector);
}

/// `slotline_replication_lag_seconds` is the age of the oldest change not acknowledged, by
/// the source's commit time: it grows while Feldera processes nothing and is 0 once caught
/// up.
fn replication_lag_seconds_ages_while_nothing_is_acknowledged(shell: Shell) {
    let (env, connector, base) = streaming_with_metrics("lagsecs", shell);
    let lag = || {
        metric(
            &get(&format!("{base}/metrics")).1,
            "slotline_replication_lag_seconds",
        )
    };
    let caught_up = wait_for(Duration::from_secs(10), || {
        (lag() == Some(0.0)).then_some(())
    });
    assert!(caught_up.is_some(), "{:?}\n{}", lag(), connector.log_text());
    env.feldera.pause();
    env.sql("INSERT INTO users VALUES (1, 'one')");
    std::thread::sleep(Duration::from_millis(2_500));
    let waiting = lag().expect("exported");
    assert!(
        (2.0..30.0).contains(&waiting),
        "{waiting} s while Feldera holds the change\n{}",
        connector.log_text()
    );
    env.feldera.resume();
    assert!(env.wait_caught_up(Duration::from_secs(30)));
    let back = wait_for(Duration::from_secs(10), || {
        (lag() == Some(0.0)).then_some(())
    });
    assert!(back.is_some(), "{:?}\n{}", lag(), connector.log_text());
    drop(connector);
}

/// 17+ creates a failover slot when asked; 15 and 16 refuse before creating anything.
fn failover_slot_follows_the_server_version(shell: Shell) {
    let env = Env::new("failover", SETUP, schema("INTEGER"));
    let version: u32 = env
        .sql("SHOW server_version_num")
        .parse()
        .expect("a number");
    let extra = [("TABLES", "users,items"), ("PG_SLOT_FAILOVER", "true")];
    let mut connector = env.start(shell, &extra);
    if version >= 170_000 {
        assert!(
            connector.wait_log("streaming from slot", Duration::from_secs(60)),
            "{}",
            connector.log_text()
        );
        let failover = env.sql(&format!(
            "SELECT failover FROM pg_replication_slots WHERE slot_name = '{}'",
            env.slot_name()
        ));
        assert_eq!(failover, "t", "{}", connector.log_text());
        // The server names no standby in synchronized_standby_slots (its default): the
        // start, check and status warn, with the setting that closes the hole.
        assert!(
            connector.wait_log(
                "synchronized_standby_slots is empty",
                Duration::from_secs(30)
            ),
            "{}",
            connector.log_text()
        );
        let status = operation(shell, &env.config(&extra), &["status"]);
        assert!(
            status
                .stdout
                .lines()
                .any(|l| l.starts_with("WARN failover ")
                    && l.contains("synchronized_standby_slots is empty")),
            "{status}"
        );
        let check = operation(shell, &env.config(&extra), &["check"]);
        let line = check
            .stdout
            .lines()
            .find(|l| l.starts_with("WARN failover "))
            .unwrap_or_else(|| panic!("no failover warning:\n{check}"));
        assert!(
            line.contains("synchronized_standby_slots is empty")
                && line.contains("(fix: on the primary, name the physical slot"),
            "{line}"
        );
    } else {
        assert_eq!(connector.wait_exit(Duration::from_secs(60)), Some(1));
        let log = connector.log_text();
        assert!(
            log.contains("PG_SLOT_FAILOVER=true needs PostgreSQL 17 or newer"),
            "{log}"
        );
        assert!(!env.slot_exists());
    }
}

/// A standby as the source: `check` says whether `hot_standby_feedback` keeps the primary
/// from removing catalog rows logical decoding on the standby needs, with the fix.
fn check_of_a_standby_source_names_hot_standby_feedback(shell: Shell) {
    let env = Env::new("standby_src", SETUP, schema("INTEGER"));
    let primary = PgCluster::start();
    primary.create_database(&env.db);
    primary.psql(&env.db, SETUP);
    // hot_standby_feedback is off by default.
    let standby = primary.standby(ClusterOptions::default());
    let url = standby.url(&env.db);
    let config = with(&env, &[("PG_URL", url.as_str())]);
    let line = |check: &Outcome, verdict: &str| {
        check
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("{verdict} standby ")))
            .map(str::to_owned)
    };
    let check = operation(shell, &config, &["check"]);
    let warned = line(&check, "WARN").unwrap_or_else(|| panic!("no standby warning:\n{check}"));
    assert!(
        warned.contains("hot_standby_feedback off")
            && warned.contains("(fix: ALTER SYSTEM SET hot_standby_feedback = on"),
        "{warned}"
    );
    standby.psql("postgres", "ALTER SYSTEM SET hot_standby_feedback = on");
    standby.psql("postgres", "SELECT pg_reload_conf()");
    let fed = wait_for(Duration::from_secs(20), || {
        line(&operation(shell, &config, &["check"]), "ok  ")
    });
    assert!(
        fed.is_some_and(|l| l.contains("hot_standby_feedback on")),
        "{}",
        operation(shell, &config, &["check"])
    );
}

/// `check` with several hosts in `PG_URL` asks each what it is: a dead host is warned about,
/// a standby passed over under `target_session_attrs=read-write`, and the survey runs on
/// the primary a start would use; `status` asks that primary too. Without a host that
/// serves, both fail saying so.
fn check_tries_every_host_of_pg_url(shell: Shell) {
    let env = Env::new("hosts_check", SETUP, schema("INTEGER"));
    let primary = PgCluster::start();
    primary.create_database(&env.db);
    primary.psql(&env.db, SETUP);
    let standby = primary.standby(ClusterOptions::default().setting("hot_standby_feedback", "on"));
    let dead = free_port();
    let url = |ports: &[u16]| {
        let hosts: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        format!(
            "postgres://postgres@{}/{}?target_session_attrs=read-write",
            hosts.join(","),
            env.db
        )
    };
    let all = url(&[dead, standby.port(), primary.port()]);
    let check = operation(shell, &with(&env, &[("PG_URL", all.as_str())]), &["check"]);
    let has = |verdict: &str, text: &str| {
        check
            .stdout
            .lines()
            .any(|l| l.starts_with(verdict) && l.contains(text))
    };
    assert!(
        has("WARN", &format!("host 1 of 3, 127.0.0.1:{dead}: ")),
        "{check}"
    );
    assert!(
        has(
            "    ",
            &format!(
                "host 2 of 3, 127.0.0.1:{}: a standby; passed over",
                standby.port()
            )
        ),
        "{check}"
    );
    assert!(
        has(
            "ok  ",
            &format!(
                "host 3 of 3, 127.0.0.1:{}: a primary accepting writes; a start uses it",
                primary.port()
            )
        ),
        "{check}"
    );
    assert!(
        has(
            "ok  ",
            &format!("connected to 127.0.0.1:{}", primary.port())
        ),
        "the survey runs on the primary: {check}"
    );
    assert_eq!(check.code, Some(0), "{check}");
    // status asks the host a start would use, passing over the dead one and the standby.
    let status = operation(shell, &with(&env, &[("PG_URL", all.as_str())]), &["status"]);
    assert!(
        status.stdout.contains(&format!(
            "asked 127.0.0.1:{} (target_session_attrs=read-write; of 3 hosts)",
            primary.port()
        )),
        "{status}"
    );
    assert!(!status.stdout.contains("cannot ask PostgreSQL"), "{status}");
    let none = url(&[dead, standby.port()]);
    let check = operation(shell, &with(&env, &[("PG_URL", none.as_str())]), &["check"]);
    assert!(
        check.stdout.lines().any(|l| l.starts_with("FAIL")
            && l.contains(
                "no host of PG_URL is what target_session_attrs=read-write asks for (2 listed)"
            )),
        "{check}"
    );
    assert_eq!(check.code, Some(1), "{check}");
    let status = operation(
        shell,
        &with(&env, &[("PG_URL", none.as_str())]),
        &["status"],
    );
    assert!(
        status
            .stdout
            .contains("no host of PG_URL could be used (target_session_attrs=read-write)")
            && status
                .stdout
                .contains("a standby, not what target_session_attrs=read-write asks for"),
        "{status}"
    );
    assert_ne!(status.code, Some(0), "{status}");
}

/// A hot standby as the source (PostgreSQL 16 and newer decode on a standby): the copy and
/// the stream of changes written on the primary make Feldera equal to the primary, and a
/// graceful stop confirms on the standby's slot. 15 cannot decode in recovery: the start is
/// refused with the server's words and creates nothing.
fn a_standby_is_a_source_copied_and_streamed(shell: Shell) {
    const WAIT: Duration = Duration::from_secs(60);
    let env = Env::new("standby_stream", SETUP, schema("INTEGER"));
    let primary = PgCluster::start();
    primary.create_database(&env.db);
    primary.psql(&env.db, SETUP);
    primary.psql(
        &env.db,
        "INSERT INTO users SELECT g, 'u' || g FROM generate_series(1, 100) g;
         INSERT INTO items SELECT 'sku' || g, g FROM generate_series(1, 20) g;",
    );
    let version: u32 = primary
        .psql("postgres", "SHOW server_version_num")
        .parse()
        .expect("a number");
    let standby = primary.standby(ClusterOptions::default().setting("hot_standby_feedback", "on"));
    let url = standby.url(&env.db);
    let slot = env.slot_name();
    let config = with(
        &env,
        &[("PG_URL", url.as_str()), ("SNAPSHOT_MODE", "initial")],
    );
    let mut connector = Connector::spawn(shell, &config, &env.name);
    if version < 160_000 {
        assert_eq!(
            connector.wait_exit(WAIT),
            Some(1),
            "{}",
            connector.log_text()
        );
        let log = connector.log_text();
        assert!(log.contains("recovery"), "{log}");
        return;
    }
    // A standby creates a logical slot once the primary logs its running transactions.
    let created = wait_for(WAIT, || {
        primary.psql("postgres", "SELECT pg_catalog.pg_log_standby_snapshot()");
        std::thread::sleep(Duration::from_millis(200));
        (standby.psql(
            "postgres",
            &format!("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}'"),
        ) == "1")
            .then_some(())
    });
    assert!(created.is_some(), "{}", connector.log_text());
    let primary_rows = |table: &str, key: &str| -> Value {
        let json = primary.psql(
            &env.db,
            &format!(
                "SELECT coalesce(json_agg(row_to_json(t) ORDER BY {key}::text), '[]') FROM {table} t"
            ),
        );
        serde_json::from_str(&json).expect("rows as JSON")
    };
    let equal = |table: &str, key: &str| {
        wait_for(WAIT, || {
            (Value::Array(env.feldera_rows(table, key)) == primary_rows(table, key)).then_some(())
        })
        .is_some()
    };
    assert!(equal("users", "id"), "{}", connector.log_text());
    assert!(equal("items", "sku"), "{}", connector.log_text());
    primary.psql(
        &env.db,
        "INSERT INTO users SELECT g, 'w' || g FROM generate_series(101, 150) g;
         UPDATE users SET name = 'changed' WHERE id <= 10; DELETE FROM users WHERE id > 140;
         UPDATE items SET qty = -1 WHERE sku = 'sku1';",
    );
    assert!(equal("users", "id"), "{}", connector.log_text());
    assert!(equal("items", "sku"), "{}", connector.log_text());
    // The standby crashes and comes back (its slot with it): slotline reconnects and
    // streams on, without copying again.
    standby.restart();
    primary.psql(
        &env.db,
        "INSERT INTO users SELECT g, 'after' || g FROM generate_series(151, 180) g;
         UPDATE items SET qty = -2 WHERE sku = 'sku2';",
    );
    assert!(equal("users", "id"), "{}", connector.log_text());
    assert!(equal("items", "sku"), "{}", connector.log_text());
    assert!(connector.is_running(), "{}", connector.log_text());
    let log = connector.log_text();
    assert!(
        log.contains("snapshot: plan: stream from the slot"),
        "the session after the standby's restart streams on without a copy: {log}"
    );
    assert_eq!(connector.stop(WAIT), Some(0), "{}", connector.log_text());
}

slotline_tests::both_shells!(
    check_of_a_correct_setup_is_all_green,
    check_of_a_broken_setup_prints_one_line_per_problem,
    check_of_a_missing_publication_lists_the_existing_ones,
    check_of_a_missing_pipeline_lists_the_existing_ones,
    status_of_a_missing_pipeline_lists_the_existing_ones,
    check_on_wal_level_replica_names_it,
    status_and_drop_slot,
    metrics_move_as_rows_flow,
    readyz_is_503_until_streaming_and_reconnects_are_counted,
    a_scrape_200_ms_after_a_change_sees_it,
    replication_lag_seconds_ages_while_nothing_is_acknowledged,
    failover_slot_follows_the_server_version,
    check_of_a_standby_source_names_hot_standby_feedback,
    a_standby_is_a_source_copied_and_streamed,
    check_tries_every_host_of_pg_url,
);
