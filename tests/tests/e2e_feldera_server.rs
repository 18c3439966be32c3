//! The core end-to-end cases, written once against two Feldera targets:
//!
//! - the double (the default, and what CI runs);
//! - Feldera's own pipeline server, when `SLOTLINE_FELDERA_SERVER` holds the URL of
//!   `tests/real-feldera`'s manager stand-in (`tests/real-feldera/run <feldera-source>` sets it).
//!
//! Every case reads Feldera's tables only through its HTTP API (ad-hoc `SELECT * FROM t`), so
//! the same assertions hold for both; the schema is `tests/fixtures/feldera-server.schema.json`,
//! the one the real server's hand-written circuit implements. docs/feldera.md, "Against
//! Feldera's own server", records the runs.

use std::time::Duration;

use serde_json::{json, Value};
use slotline_tests::e2e::{Connector, Env, Shell, Writer};
use slotline_tests::feldera_double::DoubleConfig;
use slotline_tests::pg::wait_for;

const SERVER_VAR: &str = "SLOTLINE_FELDERA_SERVER";

const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text,
        score double precision, active boolean NOT NULL, joined timestamp);
    CREATE TABLE lines (order_id bigint, line int, sku text NOT NULL, qty int NOT NULL,
        price numeric(10, 2), day date, PRIMARY KEY (order_id, line));
    CREATE PUBLICATION pub FOR TABLE users, lines;";

const WAIT: Duration = Duration::from_secs(60);

/// Feldera's manager forwards an ingress request with this timeout (docs/feldera.md).
const INGRESS_TIMEOUT: Duration = Duration::from_secs(30);

fn schema() -> Value {
    serde_json::from_str(include_str!("../fixtures/feldera-server.schema.json"))
        .expect("the schema fixture is JSON")
}

/// Where Feldera is for one test: the environment's own double, or a fresh pipeline of the
/// real server (deleted on drop).
struct Target {
    env: Env,
    server: Option<String>,
}

impl Target {
    /// A database with `SETUP`, and a pipeline with `fault_tolerance` (`None`,
    /// `"at_least_once"` or `"exactly_once"`).
    fn new(prefix: &str, fault_tolerance: Option<&str>) -> Target {
        Target::with_ingress_timeout(prefix, fault_tolerance, INGRESS_TIMEOUT)
    }

    /// Like `new`, with the manager's ingress timeout `ingress_timeout` instead of Feldera's
    /// 30 s.
    fn with_ingress_timeout(
        prefix: &str,
        fault_tolerance: Option<&str>,
        ingress_timeout: Duration,
    ) -> Target {
        let double = DoubleConfig::new("p", schema()).with_proxy_timeout(ingress_timeout);
        let env = Env::with_double(prefix, SETUP, double);
        let server = std::env::var(SERVER_VAR).ok().filter(|url| !url.is_empty());
        match &server {
            Some(url) => {
                let answer = ureq::put(&format!("{url}/control/pipelines/{}", env.name))
                    .config()
                    .http_status_as_error(false)
                    .timeout_global(Some(Duration::from_secs(300)))
                    .build()
                    .header("Content-Type", "application/json")
                    .send(
                        json!({
                            "fault_tolerance": fault_tolerance,
                            "ingress_timeout_ms": ingress_timeout.as_millis() as u64,
                        })
                        .to_string(),
                    )
                    .expect("reach the Feldera manager stand-in");
                let status = answer.status().as_u16();
                let body = answer.into_body().read_to_string().unwrap_or_default();
                assert_eq!(status, 201, "starting the pipeline failed: {body}");
            }
            None => env
                .feldera
                .set_fault_tolerance(fault_tolerance)
                .expect("a model the double knows"),
        }
        Target { env, server }
    }

    fn url(&self) -> String {
        match &self.server {
            Some(url) => url.clone(),
            None => self.env.feldera.base_url(),
        }
    }

    fn pipeline(&self) -> String {
        match &self.server {
            Some(_) => self.env.name.clone(),
            None => "p".to_owned(),
        }
    }

    fn start(&self, shell: Shell, extra: &[(&str, &str)]) -> Connector {
        let (url, pipeline) = (self.url(), self.pipeline());
        let mut pairs = vec![
            ("FELDERA_URL", url.as_str()),
            ("FELDERA_PIPELINE", pipeline.as_str()),
            ("TABLES", "users,lines"),
        ];
        pairs.extend_from_slice(extra);
        Connector::spawn(shell, &self.env.config(&pairs), &self.env.name)
    }

    /// Starts the connector with `SNAPSHOT_MODE=initial` and waits until its copy is
    /// complete and it caught up.
    fn start_copied(&self, shell: Shell) -> Connector {
        let connector = self.start(shell, &[("SNAPSHOT_MODE", "initial")]);
        assert!(
            self.env.wait_snapshot_complete_and_caught_up(WAIT),
            "the copy did not complete:\n{}",
            connector.log_text()
        );
        connector
    }

    fn pipeline_url(&self) -> String {
        format!("{}/v0/pipelines/{}", self.url(), self.pipeline())
    }

    /// Every row of `table`, by ad-hoc query, canonical (see [`canonical`]) and sorted.
    fn rows(&self, table: &str) -> Vec<Vec<String>> {
        let answer = ureq::get(&format!("{}/query", self.pipeline_url()))
            .query("sql", format!("SELECT * FROM {table}"))
            .query("format", "json")
            .config()
            .http_status_as_error(false)
            .build()
            .call()
            .expect("reach Feldera");
        let status = answer.status().as_u16();
        let body = answer.into_body().read_to_string().expect("query answer");
        assert_eq!(status, 200, "SELECT * FROM {table}: {body}");
        let rows: Vec<Value> = if body.trim_start().starts_with('[') {
            serde_json::from_str(&body).expect("a JSON array")
        } else {
            body.lines()
                .filter(|line| !line.trim().is_empty())
                .map(|line| serde_json::from_str(line).expect("a JSON object per line"))
                .collect()
        };
        canonical(table, &rows)
    }

    /// The tables of the HTTP input endpoints the pipeline holds (`/stats` `inputs`), sorted:
    /// Feldera allows 100 until it restarts, so a long run must keep reusing one per table.
    fn input_endpoint_tables(&self) -> Vec<String> {
        let text = ureq::get(&format!("{}/stats", self.pipeline_url()))
            .call()
            .expect("reach Feldera")
            .into_body()
            .read_to_string()
            .expect("stats");
        let stats: Value = serde_json::from_str(&text).expect("stats JSON");
        let mut tables: Vec<String> = stats["inputs"]
            .as_array()
            .expect("inputs")
            .iter()
            .map(|input| input["config"]["stream"].as_str().unwrap_or("?").to_owned())
            .collect();
        tables.sort();
        tables
    }

    /// PostgreSQL's rows of `table`, canonical and sorted.
    fn pg_rows(&self, table: &str) -> Vec<Vec<String>> {
        let rows = self.env.pg_rows(table, "1");
        canonical(table, &rows)
    }

    fn assert_equal(&self, connector: &Connector) {
        for table in ["users", "lines"] {
            let (feldera, pg) = (self.rows(table), self.pg_rows(table));
            assert!(
                feldera == pg,
                "{table} differs: Feldera has {} rows, PostgreSQL {}\nonly in Feldera: {:?}\nonly in PostgreSQL: {:?}\n{}",
                feldera.len(),
                pg.len(),
                feldera.iter().filter(|r| !pg.contains(r)).take(5).collect::<Vec<_>>(),
                pg.iter().filter(|r| !feldera.contains(r)).take(5).collect::<Vec<_>>(),
                connector.log_text()
            );
        }
    }

    fn wait_caught_up(&self, connector: &Connector) {
        assert!(
            self.env.wait_caught_up(WAIT),
            "not caught up:\n{}",
            connector.log_text()
        );
    }

    fn wait_slot(&self, connector: &Connector) {
        assert!(
            wait_for(WAIT, || self.env.slot_exists().then_some(())).is_some(),
            "connector did not create its slot:\n{}",
            connector.log_text()
        );
    }

    /// `POST /v0/pipelines/{p}/pause` (the double: `pause`).
    fn pause(&self) {
        match &self.server {
            Some(_) => self.lifecycle("pause"),
            None => self.env.feldera.pause(),
        }
    }

    /// `POST /v0/pipelines/{p}/resume` (the double: `resume`).
    fn resume(&self) {
        match &self.server {
            Some(_) => self.lifecycle("resume"),
            None => self.env.feldera.resume(),
        }
    }

    fn lifecycle(&self, action: &str) {
        let answer = ureq::post(&format!("{}/{action}", self.pipeline_url()))
            .config()
            .http_status_as_error(false)
            .build()
            .send_empty()
            .expect("reach Feldera");
        let status = answer.status().as_u16();
        assert!(status == 200 || status == 202, "{action}: {status}");
    }

    /// The pipeline process dies and starts again (the double's `crash_restart`).
    fn crash_restart(&self) {
        match &self.server {
            Some(url) => {
                let answer = ureq::post(&format!(
                    "{url}/control/pipelines/{}/crash_restart",
                    self.env.name
                ))
                .config()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(300)))
                .build()
                .send_empty()
                .expect("reach the Feldera manager stand-in");
                let status = answer.status().as_u16();
                let body = answer.into_body().read_to_string().unwrap_or_default();
                assert_eq!(status, 200, "restarting the pipeline failed: {body}");
            }
            None => {
                self.env.feldera.crash_restart();
            }
        }
    }

    /// The pipeline process dies and stays dead: the manager stops the pipeline (the
    /// stand-in's `kill`, the double's `crash`).
    fn kill(&self) {
        match &self.server {
            Some(url) => {
                let answer = ureq::post(&format!("{url}/control/pipelines/{}/kill", self.env.name))
                    .config()
                    .http_status_as_error(false)
                    .build()
                    .send_empty()
                    .expect("reach the Feldera manager stand-in");
                assert_eq!(answer.status().as_u16(), 200, "killing the pipeline");
            }
            None => self.env.feldera.crash(),
        }
    }

    /// `POST /v0/pipelines/{p}/start`, once the pipeline is no longer stopping.
    fn start_pipeline(&self) {
        let started = wait_for(WAIT, || {
            let answer = ureq::post(&format!("{}/start", self.pipeline_url()))
                .config()
                .http_status_as_error(false)
                .build()
                .send_empty()
                .expect("reach Feldera");
            (answer.status().as_u16() == 202).then_some(())
        });
        assert!(started.is_some(), "the pipeline never started");
    }

    /// `GET /v0/pipelines/{p}`.
    fn deployment(&self) -> Value {
        let text = ureq::get(&self.pipeline_url())
            .call()
            .expect("reach Feldera")
            .into_body()
            .read_to_string()
            .expect("pipeline");
        serde_json::from_str(&text).expect("pipeline JSON")
    }

    /// The status and error code of `GET /v0/pipelines/{p}/stats`.
    fn stats_answer(&self) -> (u16, Value) {
        let answer = ureq::get(&format!("{}/stats", self.pipeline_url()))
            .config()
            .http_status_as_error(false)
            .build()
            .call()
            .expect("reach Feldera");
        let status = answer.status().as_u16();
        let text = answer.into_body().read_to_string().unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// `total_records` of `table`'s ingress endpoints (`/stats` `inputs`).
    fn records_read(&self, table: &str) -> u64 {
        let (status, stats) = self.stats_answer();
        assert_eq!(status, 200, "stats: {stats}");
        stats["inputs"]
            .as_array()
            .expect("inputs")
            .iter()
            .filter(|input| input["config"]["stream"] == table)
            .map(|input| input["metrics"]["total_records"].as_u64().unwrap_or(0))
            .sum()
    }

    /// One ingress request of `records` (inserts), its status and body.
    fn post_ingress(&self, table: &str, records: &[Value]) -> (u16, String) {
        let body: String = records
            .iter()
            .map(|r| json!({ "insert": r }).to_string() + "\n")
            .collect();
        let answer = ureq::post(&format!("{}/ingress/{table}", self.pipeline_url()))
            .query("format", "json")
            .query("update_format", "insert_delete")
            .query("lines", "multiple")
            .config()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(120)))
            .build()
            .send(body.as_bytes())
            .expect("reach Feldera");
        let status = answer.status().as_u16();
        (
            status,
            answer.into_body().read_to_string().unwrap_or_default(),
        )
    }

    /// Rows straight into Feldera's ingress, as another writer (or an earlier copy) left them.
    fn ingest(&self, table: &str, records: &[Value]) {
        let body: String = records
            .iter()
            .map(|r| json!({ "insert": r }).to_string() + "\n")
            .collect();
        let answer = ureq::post(&format!("{}/ingress/{table}", self.pipeline_url()))
            .query("format", "json")
            .query("update_format", "insert_delete")
            .query("lines", "multiple")
            .config()
            .http_status_as_error(false)
            .build()
            .send(body.as_bytes())
            .expect("reach Feldera");
        let status = answer.status().as_u16();
        let text = answer.into_body().read_to_string().unwrap_or_default();
        assert_eq!(status, 200, "ingress into {table}: {text}");
        // The rows are processed once a query sees them.
        let wanted = records.len();
        assert!(
            wait_for(WAIT, || (self.rows(table).len() >= wanted).then_some(())).is_some(),
            "the ingested rows never showed in {table}"
        );
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Some(url) = &self.server {
            let _ = ureq::delete(&format!("{url}/control/pipelines/{}", self.env.name))
                .config()
                .http_status_as_error(false)
                .build()
                .call();
        }
    }
}

/// The rows of `table` as comparable text, sorted: the columns in the schema's order, each
/// value written one way whatever side wrote it. PostgreSQL's `row_to_json` and Feldera's
/// JSON output spell a timestamp `2024-01-02T03:04:05` and `2024-01-02 03:04:05`, a numeric
/// `1.50` and `1.5`; the data of these tests have whole seconds and at most two decimals.
fn canonical(table: &str, rows: &[Value]) -> Vec<Vec<String>> {
    let columns: &[&str] = match table {
        "users" => &["id", "name", "score", "active", "joined"],
        "lines" => &["order_id", "line", "sku", "qty", "price", "day"],
        other => panic!("no columns for {other}"),
    };
    let text = |value: &Value| match value {
        Value::Null => "NULL".to_owned(),
        Value::Number(n) => {
            let f: f64 = n.to_string().parse().expect("a number");
            format!("{f}")
        }
        Value::String(s) if s.len() == 19 && s.as_bytes()[10] == b'T' => s.replacen('T', " ", 1),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut out: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            // Feldera's names are case-insensitive; its JSON may spell them either way.
            let object = row.as_object().expect("a row is an object");
            columns
                .iter()
                .map(|c| {
                    let value = object
                        .iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case(c))
                        .map(|(_, v)| v)
                        .unwrap_or(&Value::Null);
                    text(value)
                })
                .collect()
        })
        .collect();
    out.sort();
    out
}

/// Inserts, updates (one changing a key, one setting NULLs) and deletes over both tables,
/// numbered from `base`.
fn workload(target: &Target, base: i64) {
    target.env.sql(&format!(
        "INSERT INTO users SELECT g, 'u' || g, g * 0.5, g % 2 = 0,
             TIMESTAMP '2024-01-01 00:00:00' + g * INTERVAL '1 minute'
           FROM generate_series({base}, {base} + 49) g;
         INSERT INTO lines SELECT g / 3, g % 3, 's' || g, g, g * 1.25, DATE '2024-01-01' + (g % 30)::int
           FROM generate_series({base}, {base} + 59) g;
         UPDATE users SET name = 'renamed', score = NULL, joined = NULL WHERE id = {base} + 1;
         UPDATE users SET id = -id WHERE id = {base} + 2;
         DELETE FROM users WHERE id = {base} + 3;
         UPDATE lines SET qty = qty + 100, price = NULL WHERE order_id = {base} / 3 + 1;
         DELETE FROM lines WHERE order_id = {base} / 3 + 2 AND line = 0"
    ));
}

fn stop_cleanly(connector: &mut Connector) {
    assert_eq!(
        connector.stop(Duration::from_secs(20)),
        Some(0),
        "{}",
        connector.log_text()
    );
}

/// Streaming, and a crash at each of the send-and-await path's points: after each crash
/// the next run resends from the slot's position and the tables end equal.
fn streams_and_recovers_from_crash_points(shell: Shell) {
    let target = Target::new("srv_crash", None);
    let mut connector = target.start(shell, &[]);
    target.wait_slot(&connector);
    workload(&target, 1000);
    target.wait_caught_up(&connector);
    target.assert_equal(&connector);
    stop_cleanly(&mut connector);

    for (n, point) in ["before_send", "after_send", "after_complete", "after_ack"]
        .into_iter()
        .enumerate()
    {
        let mut crashing = target.start(shell, &[("CRASH_AT", point)]);
        workload(&target, 2000 + 1000 * n as i64);
        assert_eq!(
            crashing.wait_exit(WAIT),
            Some(70),
            "{point}: {}",
            crashing.log_text()
        );
        let mut connector = target.start(shell, &[]);
        target.wait_caught_up(&connector);
        target.assert_equal(&connector);
        stop_cleanly(&mut connector);
    }
    assert_eq!(
        target.input_endpoint_tables(),
        ["lines", "users"],
        "five runs share one ingress endpoint per table"
    );
}

/// SIGTERM while a writer commits: exit 0, and the next run delivers the rest.
fn graceful_stop_under_a_writer(shell: Shell) {
    let target = Target::new("srv_stop", None);
    let mut connector = target.start(shell, &[]);
    target.wait_slot(&connector);
    let writer = Writer::start(
        target.env.pg,
        &target.env.db,
        Duration::from_millis(5),
        |n| {
            let id = n as i64;
            format!(
                "INSERT INTO users VALUES ({id}, 'w{id}', NULL, true, NULL);
                 UPDATE users SET active = false WHERE id = {id} - 1"
            )
        },
    );
    assert!(writer.wait_committed(40, WAIT), "the writer is stuck");
    stop_cleanly(&mut connector);
    let mut connector = target.start(shell, &[]);
    assert!(writer.wait_committed(80, WAIT), "the writer is stuck");
    writer.stop();
    target.wait_caught_up(&connector);
    target.assert_equal(&connector);
    stop_cleanly(&mut connector);
}

/// TRUNCATE becomes retractions of exactly what Feldera holds (its keys read by ad-hoc
/// query), in the order of the transactions around it.
fn truncate_retracts(shell: Shell) {
    let target = Target::new("srv_truncate", None);
    let mut connector = target.start(shell, &[]);
    target.wait_slot(&connector);
    workload(&target, 1000);
    target.env.sql(
        "BEGIN; TRUNCATE users; INSERT INTO users VALUES (7, 'after', 1.5, true, NULL); COMMIT;
         INSERT INTO lines VALUES (9000, 1, 'late', 1, NULL, NULL);
         TRUNCATE lines;
         INSERT INTO lines VALUES (9001, 1, 'last', 2, 2.50, DATE '2024-02-29')",
    );
    target.wait_caught_up(&connector);
    target.assert_equal(&connector);
    assert_eq!(
        target.rows("users").len(),
        1,
        "only the row after the TRUNCATE"
    );
    stop_cleanly(&mut connector);
}

/// The initial copy into a pipeline that already holds rows: keys PostgreSQL does not have
/// are retracted, stale values replaced, and streaming goes on from the snapshot.
fn snapshot_replaces_leftovers(shell: Shell) {
    let target = Target::new("srv_snapshot", None);
    workload(&target, 1000);
    target.ingest(
        "users",
        &[
            json!({"id": 1010, "name": "stale", "score": 1.0, "active": true, "joined": null}),
            json!({"id": 424242, "name": "ghost", "score": null, "active": false, "joined": null}),
        ],
    );
    target.ingest(
        "lines",
        &[json!({"order_id": 777777, "line": 1, "sku": "ghost", "qty": 1, "price": null, "day": null})],
    );
    let mut connector = target.start_copied(shell);
    target.assert_equal(&connector);
    workload(&target, 5000);
    target.wait_caught_up(&connector);
    target.assert_equal(&connector);
    stop_cleanly(&mut connector);
}

/// Feldera transactions around every batch, with small batches and one large source
/// transaction.
fn feldera_transactions(shell: Shell) {
    let target = Target::new("srv_tx", None);
    let mut connector = target.start(
        shell,
        &[("FELDERA_TRANSACTIONS", "all"), ("BATCH_MAX_ROWS", "500")],
    );
    target.wait_slot(&connector);
    workload(&target, 1000);
    target.env.sql(
        "INSERT INTO users SELECT g, 'big', NULL, false, NULL FROM generate_series(100000, 104999) g",
    );
    workload(&target, 2000);
    target.wait_caught_up(&connector);
    target.assert_equal(&connector);
    stop_cleanly(&mut connector);
}

/// With fault tolerance the flush waits for a checkpoint; the pipeline then dies and comes
/// back from it, and slotline resends what the checkpoint does not hold.
fn checkpoint_survives_a_pipeline_crash(shell: Shell) {
    let target = Target::new("srv_ckpt", Some("at_least_once"));
    let mut connector = target.start_copied(shell);
    workload(&target, 1000);
    target.wait_caught_up(&connector);
    target.assert_equal(&connector);
    target.crash_restart();
    // What the slot confirmed, a checkpoint held: the tables come back equal.
    target.assert_equal(&connector);
    workload(&target, 2000);
    target.wait_caught_up(&connector);
    target.assert_equal(&connector);
    let log = connector.log_text();
    assert!(
        log.contains("acknowledging what a Feldera checkpoint holds"),
        "FELDERA_DURABILITY=auto chose checkpoints: {log}"
    );
    assert!(
        log.contains("restarted (incarnation"),
        "the restart was noticed: {log}"
    );
    stop_cleanly(&mut connector);
}

/// `FELDERA_DURABILITY=checkpoint` on a pipeline whose every checkpoint fails (no storage;
/// Feldera's community edition cannot checkpoint at all): nothing is acknowledged, and the
/// run ends loudly instead of holding WAL for ever.
fn checkpoints_that_always_fail_end_the_run(shell: Shell) {
    let target = Target::new("srv_nockpt", None);
    let mut connector = target.start(
        shell,
        &[
            ("FELDERA_DURABILITY", "checkpoint"),
            ("NO_PROGRESS_TIMEOUT_SECS", "30"),
        ],
    );
    target.wait_slot(&connector);
    workload(&target, 1000);
    let code = connector.wait_exit(WAIT);
    let log = connector.log_text();
    assert_eq!(code, Some(1), "{log}");
    // The pipeline's own refusal, or (community edition) the manager's 501.
    assert!(
        log.contains("cannot checkpoint: The pipeline does not support checkpointing")
            || log.contains("Cannot use enterprise-only feature (checkpoint)"),
        "the reason is Feldera's: {log}"
    );
    // The flush may move past other databases' WAL, never past the workload's commit: the
    // slot still yields its 110 inserts and the rest (peeking consumes nothing).
    let held: i64 = target
        .env
        .sql(&format!(
            "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('{}', NULL, NULL,
                 'proto_version', '1', 'publication_names', 'pub')",
            target.env.slot_name()
        ))
        .parse()
        .expect("a count");
    assert!(
        held >= 110,
        "the slot gave up the unacknowledged workload ({held} messages left):\n{log}"
    );
}

/// Without fault tolerance a pipeline crash loses everything Feldera held, acknowledged or
/// not: slotline sees the new incarnation and copies every table again.
fn pipeline_crash_without_fault_tolerance_copies_again(shell: Shell) {
    let target = Target::new("srv_lossy", None);
    let mut connector = target.start_copied(shell);
    workload(&target, 1000);
    target.wait_caught_up(&connector);
    target.assert_equal(&connector);
    target.crash_restart();
    workload(&target, 2000);
    let copied_again = wait_for(WAIT, || {
        (target.env.wait_caught_up(Duration::from_secs(1))
            && target.rows("users") == target.pg_rows("users")
            && target.rows("lines") == target.pg_rows("lines"))
        .then_some(())
    });
    assert!(
        copied_again.is_some(),
        "Feldera never held PostgreSQL's rows again:\n{}",
        connector.log_text()
    );
    assert!(
        connector
            .log_text()
            .contains("restarted without fault tolerance (incarnation"),
        "the restart was noticed: {}",
        connector.log_text()
    );
    stop_cleanly(&mut connector);
}

/// A pause longer than the manager's ingress timeout: the requests sent meanwhile are
/// answered 503 by the manager, yet Feldera still holds their bodies and applies them when
/// it resumes, whenever that is (docs/feldera.md). The replay must not be overwritten by
/// them.
fn a_pause_longer_than_the_ingress_timeout(shell: Shell) {
    let timeout = Duration::from_secs(3);
    let target = Target::with_ingress_timeout("srv_pause", None, timeout);
    let mut connector = target.start(shell, &[]);
    target.wait_slot(&connector);
    target
        .env
        .sql("INSERT INTO users SELECT g, 'v0', NULL, true, NULL FROM generate_series(1, 20) g");
    target.wait_caught_up(&connector);
    for round in 1..=3 {
        target.pause();
        target.env.sql(&format!(
            "UPDATE users SET name = 'a{round}' WHERE id <= 10"
        ));
        std::thread::sleep(timeout + Duration::from_secs(2));
        target.env.sql(&format!(
            "UPDATE users SET name = 'b{round}' WHERE id <= 10"
        ));
        std::thread::sleep(Duration::from_secs(2));
        target.resume();
        target.wait_caught_up(&connector);
        target.assert_equal(&connector);
    }
    stop_cleanly(&mut connector);
}

/// A process killed while Feldera is paused leaves the bodies of its requests in Feldera
/// (the manager answered 503, the pipeline still holds them), and Feldera applies them when
/// it resumes, after or among what the next process sends. The next process must not let
/// them overwrite its replay: it finds the table's endpoint not reading at its start and
/// writes to that table only once Feldera's counters show the endpoint read everything
/// (docs/feldera.md, "Bodies that outlive their request").
fn a_held_body_outlives_the_process_that_sent_it(shell: Shell) {
    let timeout = Duration::from_secs(3);
    let target = Target::with_ingress_timeout("srv_held", None, timeout);
    let mut connector = target.start(shell, &[]);
    target.wait_slot(&connector);
    target
        .env
        .sql("INSERT INTO users SELECT g, 'v0', NULL, true, NULL FROM generate_series(1, 60) g");
    target.wait_caught_up(&connector);
    for round in 1..=3 {
        target.pause();
        target
            .env
            .sql(&format!("UPDATE users SET name = 'a{round}'"));
        // The manager gives up on the request; Feldera keeps its body.
        std::thread::sleep(timeout + Duration::from_secs(2));
        connector.kill();
        target
            .env
            .sql(&format!("UPDATE users SET name = 'b{round}'"));
        connector = target.start(shell, &[]);
        // The new process replays while Feldera is still paused, then Feldera resumes.
        assert!(
            connector.wait_log("may hold a body an earlier process sent", WAIT),
            "the start did not see the endpoint that may hold a body:\n{}",
            connector.log_text()
        );
        std::thread::sleep(Duration::from_secs(1));
        target.resume();
        target.wait_caught_up(&connector);
        target.assert_equal(&connector);
    }
    stop_cleanly(&mut connector);
}

/// The manager leaves a crashed pipeline stopped, with its error, until someone starts it
/// (`runner/pipeline_automata.rs`); meanwhile every pipeline endpoint answers 503
/// `PipelineInteractionNotDeployed`, and slotline waits, then copies again.
fn a_crashed_pipeline_stays_stopped_until_started(shell: Shell) {
    let target = Target::new("srv_stopped", None);
    let mut connector = target.start_copied(shell);
    workload(&target, 1000);
    target.wait_caught_up(&connector);
    target.assert_equal(&connector);
    target.kill();
    let stopped = wait_for(Duration::from_secs(20), || {
        (target.deployment()["deployment_status"] == "Stopped").then_some(())
    });
    assert!(stopped.is_some(), "not stopped: {}", target.deployment());
    let pipeline = target.deployment();
    assert_eq!(pipeline["deployment_desired_status"], "Stopped");
    assert_eq!(
        pipeline["deployment_error"]["error_code"],
        "RunnerCheckError"
    );
    workload(&target, 2000);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        target.deployment()["deployment_status"],
        "Stopped",
        "nothing restarted it"
    );
    let (status, error) = target.stats_answer();
    assert_eq!(
        (status, &error["error_code"]),
        (503, &json!("PipelineInteractionNotDeployed"))
    );
    target.start_pipeline();
    let copied_again = wait_for(WAIT, || {
        (target.env.wait_caught_up(Duration::from_secs(1))
            && target.rows("users") == target.pg_rows("users")
            && target.rows("lines") == target.pg_rows("lines"))
        .then_some(())
    });
    assert!(
        copied_again.is_some(),
        "Feldera never held PostgreSQL's rows again:\n{}",
        connector.log_text()
    );
    stop_cleanly(&mut connector);
}

/// Two requests of one table: `A`, which the manager gave up on during a pause, and `B`,
/// sent after the resume. The manager streams ingress and never sends it again (only the
/// requests without a body are retried), so `A` is read once, at the resume, before `B`.
#[test]
fn an_abandoned_ingress_lands_once_before_the_next_request_of_its_table() {
    let target = Target::with_ingress_timeout("srv_once", None, Duration::from_secs(2));
    let rows = |name: &str| -> Vec<Value> {
        (1..=20)
            .map(|id| json!({"id": id, "name": name, "active": true}))
            .collect()
    };
    let names = || -> Vec<String> {
        target
            .rows("users")
            .into_iter()
            .map(|row| row[1].clone())
            .collect()
    };
    target.pause();
    let (status, text) = target.post_ingress("users", &rows("a"));
    assert_eq!(status, 503, "A during the pause: {text}");
    assert!(text.contains("PipelineInteractionUnreachable"), "{text}");
    target.resume();
    let landed = wait_for(WAIT, || (names().len() == 20).then_some(()));
    assert!(landed.is_some(), "A never landed: {:?}", names());
    assert_eq!(target.records_read("users"), 20, "A was read once");
    let (status, text) = target.post_ingress("users", &rows("b"));
    assert_eq!(status, 200, "B: {text}");
    let b_won = wait_for(WAIT, || {
        (target.records_read("users") == 40 && names().iter().all(|n| n == "b")).then_some(())
    });
    assert!(b_won.is_some(), "B did not win: {:?}", names());
    std::thread::sleep(Duration::from_secs(1));
    assert!(names().iter().all(|n| n == "b"), "A after B: {:?}", names());
    assert_eq!(target.records_read("users"), 40, "A once and B once");
}

/// Each case runs in both shells: `<case>::tokio` and `<case>::blocking`.
macro_rules! in_both_shells {
    ($($case:ident),* $(,)?) => {$(
        mod $case {
            #[test]
            fn tokio() {
                super::$case(super::Shell::Tokio);
            }

            #[test]
            fn blocking() {
                super::$case(super::Shell::Blocking);
            }
        }
    )*};
}

in_both_shells!(
    streams_and_recovers_from_crash_points,
    graceful_stop_under_a_writer,
    truncate_retracts,
    snapshot_replaces_leftovers,
    feldera_transactions,
    checkpoint_survives_a_pipeline_crash,
    checkpoints_that_always_fail_end_the_run,
    pipeline_crash_without_fault_tolerance_copies_again,
    a_pause_longer_than_the_ingress_timeout,
    a_held_body_outlives_the_process_that_sent_it,
    a_crashed_pipeline_stays_stopped_until_started,
);
