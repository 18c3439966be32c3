//! End to end: Feldera and PostgreSQL misbehaving while slotline streams.
//!
//! - `FELDERA_ACK_MODE`: against a Feldera that accepts but never processes and then
//!   restarts empty, `accepted` loses the rows for good (the slot moved on), `completed`
//!   loses nothing (the slot waited, the replay restores them).
//! - Feldera unavailable (503): no acknowledgement while it is down, reconnects with growing
//!   backoff attempts, catches up when it is back; down for good: exit 69, slot unmoved.
//! - The walsender killed mid-stream: a new session, nothing lost.

use serde_json::json;
use slotline_tests::e2e::{Connector, Env, Shell};
use slotline_tests::feldera_double::{CompletionDelay, DoubleConfig};
use slotline_tests::pg::wait_for;
use std::time::Duration;

fn schema() -> serde_json::Value {
    json!({"inputs": [
        {"name": "users", "case_sensitive": false, "primary_key": ["id"], "materialized": false, "properties": {},
         "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "name", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": true, "precision": -1}}]}
    ], "outputs": []})
}

const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text);
    CREATE PUBLICATION pub FOR TABLE users;";

const TABLES: (&str, &str) = ("TABLES", "users");
const LINGER_0: (&str, &str) = ("BATCH_LINGER_MS", "0");

fn ingress_accepted(env: &Env) -> usize {
    env.feldera
        .requests()
        .iter()
        .filter(|r| r.endpoint == "ingress" && r.status == 200)
        .count()
}

fn feldera_ids(env: &Env) -> Vec<i64> {
    let mut ids: Vec<i64> = env
        .feldera
        .table("users")
        .map(|t| t.rows.iter().filter_map(|r| r.row["id"].as_i64()).collect())
        .unwrap_or_default();
    ids.sort_unstable();
    ids
}

/// Feldera accepts (200 + token) but never processes, then restarts losing what it had
/// accepted; slotline is restarted afterwards and one more row is written.
fn feldera_restart_after_accepting(shell: Shell, ack_mode: &str) {
    let double = DoubleConfig::new("p", schema()).with_completion_delay(CompletionDelay::Never);
    let env = Env::with_double("ackmode", SETUP, double);
    let config = [TABLES, LINGER_0, ("FELDERA_ACK_MODE", ack_mode)];
    let mut first = env.start(shell, &config);
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "not streaming:\n{}",
        first.log_text()
    );
    let first_txn = env.write_txn("INSERT INTO users VALUES (1, 'a'), (2, 'b')");
    env.sql("INSERT INTO users VALUES (3, 'c')");
    let accepted = wait_for(Duration::from_secs(30), || {
        (ingress_accepted(&env) >= 1).then_some(())
    });
    assert!(
        accepted.is_some(),
        "Feldera never accepted a batch:\n{}",
        first.log_text()
    );
    if ack_mode == "accepted" {
        // Acknowledged on 200: the slot moves past rows Feldera never processed.
        assert!(
            env.wait_caught_up(Duration::from_secs(30)),
            "accepted mode did not acknowledge accepted rows:\n{}",
            first.log_text()
        );
    } else {
        // Waiting for a completion that never comes: the slot stays before the rows.
        let polled = wait_for(Duration::from_secs(30), || {
            env.feldera
                .requests()
                .iter()
                .any(|r| r.endpoint == "completion_status")
                .then_some(())
        });
        assert!(
            polled.is_some(),
            "no completion poll:\n{}",
            first.log_text()
        );
        assert!(
            env.slot_at_or_before(&first_txn),
            "completed mode acknowledged unprocessed rows: slot {:?}, first commit after {first_txn}\n{}",
            env.slot_confirmed(),
            first.log_text()
        );
    }
    assert_eq!(
        feldera_ids(&env),
        Vec::<i64>::new(),
        "nothing was processed"
    );

    env.feldera
        .set_completion_delay(CompletionDelay::Fixed(Duration::ZERO));
    env.feldera.restart(false);
    assert_eq!(
        first.stop(Duration::from_secs(15)),
        Some(0),
        "{}",
        first.log_text()
    );
    let mut second = env.start(shell, &config);
    env.sql("INSERT INTO users VALUES (100, 'after the restart')");
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "the restarted connector did not catch up:\n{}",
        second.log_text()
    );
    // In accepted mode the last acknowledgement does not wait for processing.
    let processed = wait_for(Duration::from_secs(10), || {
        feldera_ids(&env).contains(&100).then_some(())
    });
    assert!(processed.is_some(), "{}", second.log_text());
    if ack_mode == "accepted" {
        assert_eq!(
            feldera_ids(&env),
            vec![100],
            "accepted mode: rows 1, 2 and 3 are lost for good (acknowledged, never processed)"
        );
        assert_eq!(env.pg_rows("users", "id").len(), 4);
    } else {
        env.assert_rows_equal("users", "users", "id");
    }
    assert_eq!(
        second.stop(Duration::from_secs(15)),
        Some(0),
        "{}",
        second.log_text()
    );
}

#[test]
fn accepted_mode_loses_rows_when_feldera_restarts_before_processing_tokio() {
    feldera_restart_after_accepting(Shell::Tokio, "accepted");
}

#[test]
fn accepted_mode_loses_rows_when_feldera_restarts_before_processing_blocking() {
    feldera_restart_after_accepting(Shell::Blocking, "accepted");
}

#[test]
fn completed_mode_replays_rows_feldera_lost_in_a_restart_tokio() {
    feldera_restart_after_accepting(Shell::Tokio, "completed");
}

#[test]
fn completed_mode_replays_rows_feldera_lost_in_a_restart_blocking() {
    feldera_restart_after_accepting(Shell::Blocking, "completed");
}

/// Feldera accepts a transaction and withholds its completion, then restarts empty while
/// the connector keeps running; the next transaction goes to the new incarnation and
/// completes at once. That token vouches for nothing the old incarnation accepted: the
/// earlier rows are replayed, never acknowledged unseen.
fn feldera_restart_under_a_running_connector(shell: Shell) {
    let double = DoubleConfig::new("p", schema()).with_completion_delay(CompletionDelay::Never);
    let env = Env::with_double("restart_live", SETUP, double);
    let mut connector = env.start(shell, &[TABLES, LINGER_0]);
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "not streaming:\n{}",
        connector.log_text()
    );
    env.sql("INSERT INTO users SELECT g, 'before' FROM generate_series(1, 217) g");
    let polled = wait_for(Duration::from_secs(30), || {
        env.feldera
            .requests()
            .iter()
            .any(|r| r.endpoint == "completion_status")
            .then_some(())
    });
    assert!(
        polled.is_some(),
        "no completion poll:\n{}",
        connector.log_text()
    );
    // Past 5 s of waiting the polls space out to a second: the next transaction is accepted
    // and its token asked about before the old token is asked again.
    std::thread::sleep(Duration::from_secs(7));
    env.feldera.restart(false);
    env.feldera
        .set_completion_delay(CompletionDelay::Fixed(Duration::ZERO));
    env.sql("INSERT INTO users VALUES (1001, 'after'), (1002, 'after'), (1003, 'after')");
    assert!(
        env.wait_caught_up(Duration::from_secs(60)),
        "did not catch up after the restart:\n{}",
        connector.log_text()
    );
    assert_eq!(
        feldera_ids(&env).len(),
        220,
        "the 217 rows the old incarnation lost must be replayed:\n{}",
        connector.log_text()
    );
    env.assert_rows_equal("users", "users", "id");
    assert_eq!(
        connector.stop(Duration::from_secs(15)),
        Some(0),
        "{}",
        connector.log_text()
    );
}

#[test]
fn a_new_incarnations_token_never_vouches_for_rows_the_old_one_lost_tokio() {
    feldera_restart_under_a_running_connector(Shell::Tokio);
}

#[test]
fn a_new_incarnations_token_never_vouches_for_rows_the_old_one_lost_blocking() {
    feldera_restart_under_a_running_connector(Shell::Blocking);
}

/// Feldera matches PostgreSQL, a second session did the work, and the connector stops.
fn converged_in_a_second_session(env: &Env, connector: &mut Connector) {
    env.assert_rows_equal("users", "users", "id");
    let log = connector.log_text();
    assert!(log.contains("session 2 starting"), "no new session:\n{log}");
    assert_eq!(connector.stop(Duration::from_secs(15)), Some(0), "{log}");
}

/// A session ends while Feldera is still reading its request for T5 (Feldera queues a
/// request's records as they arrive); the next session replays T5 and T6 on the same
/// table. The old request's late records must not land after the replay: the new session
/// writes to the table only once the old request ended.
fn session_ends_while_a_request_still_uploads(shell: Shell) {
    let env = Env::new("stale_upload", SETUP, schema());
    let mut connector = env.start(shell, &[TABLES, LINGER_0]);
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "not streaming:\n{}",
        connector.log_text()
    );
    env.sql("INSERT INTO users SELECT g, 'v0' FROM generate_series(1, 800) g");
    assert!(env.wait_caught_up(Duration::from_secs(30)));

    env.feldera
        .read_slowly("users", 1, 4_000)
        .expect("a slow read of the next request");
    env.sql("UPDATE users SET name = 'v5'");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(env.kill_walsender(), "no walsender to terminate");
    env.sql("UPDATE users SET name = 'v6'");
    assert!(
        env.wait_caught_up(Duration::from_secs(90)),
        "no catch-up after the session ended:\n{}",
        connector.log_text()
    );
    let stale: Vec<i64> = env
        .feldera
        .table("users")
        .map(|t| {
            t.rows
                .iter()
                .filter(|r| r.row["name"] != "v6")
                .filter_map(|r| r.row["id"].as_i64())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        stale.is_empty(),
        "{} of 800 rows kept an older value than the slot acknowledged:\n{}",
        stale.len(),
        connector.log_text()
    );
    converged_in_a_second_session(&env, &mut connector);
}

#[test]
fn a_request_of_an_ended_session_never_lands_after_the_replay_tokio() {
    session_ends_while_a_request_still_uploads(Shell::Tokio);
}

#[test]
fn a_request_of_an_ended_session_never_lands_after_the_replay_blocking() {
    session_ends_while_a_request_still_uploads(Shell::Blocking);
}

/// `(delay_ms, attempt)` of every "reconnecting in N ms (attempt k, ...)" line.
fn reconnects(log: &str) -> Vec<(u64, u32)> {
    log.lines()
        .filter_map(|line| {
            let rest = line.split("reconnecting in ").nth(1)?;
            let (delay, rest) = rest.split_once(" ms (attempt ")?;
            let attempt = rest.split([')', ',']).next()?;
            Some((delay.parse().ok()?, attempt.parse().ok()?))
        })
        .collect()
}

fn outage_then_recovery(shell: Shell) {
    let env = Env::new("outage", SETUP, schema());
    let mut connector = env.start(shell, &[TABLES, LINGER_0]);
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "not streaming:\n{}",
        connector.log_text()
    );
    env.sql("INSERT INTO users VALUES (1, 'before')");
    assert!(env.wait_caught_up(Duration::from_secs(30)));

    // Down until cleared, so the checks below never race the end of the outage.
    env.feldera.set_unavailable(None);
    let first_txn = env.write_txn("INSERT INTO users VALUES (2, 'during'), (3, 'during')");
    env.sql("UPDATE users SET name = 'changed during' WHERE id = 1");
    let retried = wait_for(Duration::from_secs(30), || {
        (reconnects(&connector.log_text()).len() >= 3).then_some(())
    });
    assert!(
        retried.is_some(),
        "no repeated reconnects:\n{}",
        connector.log_text()
    );
    assert!(
        env.slot_at_or_before(&first_txn),
        "acknowledged during the outage: slot {:?}, first commit after {first_txn}",
        env.slot_confirmed()
    );
    assert_eq!(feldera_ids(&env), vec![1]);
    assert!(env.feldera.requests().iter().any(|r| r.status == 503));

    env.feldera.clear_unavailable();
    env.sql("INSERT INTO users VALUES (4, 'after')");
    assert!(
        env.wait_caught_up(Duration::from_secs(60)),
        "no catch-up after the outage:\n{}",
        connector.log_text()
    );
    env.assert_rows_equal("users", "users", "id");

    // Without durable progress the attempts count up (1, 2, 3, ...), and each delay stays
    // under its growing ceiling (100 ms * 2^(k-1), full jitter).
    let seen = reconnects(&connector.log_text());
    let attempts: Vec<u32> = seen.iter().map(|(_, k)| *k).collect();
    let expected: Vec<u32> = (1..=attempts.len() as u32).collect();
    assert_eq!(attempts, expected, "attempts of {seen:?}");
    for (delay, attempt) in &seen {
        let ceiling = 100u64 << (attempt - 1).min(20);
        assert!(
            *delay <= ceiling.min(30_000),
            "delay {delay} ms of attempt {attempt} is over its ceiling {ceiling} ms"
        );
    }
    assert_eq!(
        connector.stop(Duration::from_secs(15)),
        Some(0),
        "{}",
        connector.log_text()
    );
}

#[test]
fn feldera_outage_holds_the_slot_retries_with_backoff_then_catches_up_tokio() {
    outage_then_recovery(Shell::Tokio);
}

#[test]
fn feldera_outage_holds_the_slot_retries_with_backoff_then_catches_up_blocking() {
    outage_then_recovery(Shell::Blocking);
}

fn permanent_outage_exits_69(shell: Shell) {
    let env = Env::new("down", SETUP, schema());
    let mut connector = env.start(shell, &[TABLES, ("NO_PROGRESS_TIMEOUT_SECS", "5")]);
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "not streaming:\n{}",
        connector.log_text()
    );
    env.feldera.set_unavailable(None);
    env.sql("INSERT INTO users VALUES (1, 'never delivered')");
    let code = connector.wait_exit(Duration::from_secs(90));
    let log = connector.log_text();
    assert_eq!(code, Some(69), "{log}");
    assert!(log.contains("no durable progress"), "{log}");
    assert_eq!(
        env.slot_pending_changes(),
        1,
        "the row Feldera never took is no longer in the slot (confirmed {:?})\n{log}",
        env.slot_confirmed()
    );
}

#[test]
fn feldera_down_for_good_exits_69_without_moving_the_slot_tokio() {
    permanent_outage_exits_69(Shell::Tokio);
}

#[test]
fn feldera_down_for_good_exits_69_without_moving_the_slot_blocking() {
    permanent_outage_exits_69(Shell::Blocking);
}

fn walsender_killed_mid_stream(shell: Shell) {
    // Slow completions keep batches in flight, so the kill lands mid-stream.
    let double = DoubleConfig::new("p", schema())
        .with_completion_delay(CompletionDelay::Fixed(Duration::from_millis(300)));
    let env = Env::with_double("walsender", SETUP, double);
    let mut connector = env.start(shell, &[TABLES, LINGER_0]);
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "not streaming:\n{}",
        connector.log_text()
    );
    for id in 1..=4 {
        env.sql(&format!("INSERT INTO users VALUES ({id}, 'first {id}')"));
    }
    let sent = wait_for(Duration::from_secs(30), || {
        (ingress_accepted(&env) >= 1).then_some(())
    });
    assert!(sent.is_some(), "{}", connector.log_text());
    assert!(env.kill_walsender(), "no walsender to terminate");
    env.sql("UPDATE users SET id = 20, name = 'moved' WHERE id = 2");
    env.sql("DELETE FROM users WHERE id = 3");
    env.sql("INSERT INTO users VALUES (3, 'again'), (5, 'e')");
    assert!(
        env.wait_caught_up(Duration::from_secs(60)),
        "no catch-up after the walsender died:\n{}",
        connector.log_text()
    );
    converged_in_a_second_session(&env, &mut connector);
}

#[test]
fn walsender_killed_mid_stream_reconnects_and_loses_nothing_tokio() {
    walsender_killed_mid_stream(Shell::Tokio);
}

#[test]
fn walsender_killed_mid_stream_reconnects_and_loses_nothing_blocking() {
    walsender_killed_mid_stream(Shell::Blocking);
}

/// Backpressure from a Running pipeline. Another writer fills `users`' ingress queue
/// (100,000 records the circuit has not taken), so Feldera reads none of slotline's bodies
/// and the manager gives up on them (503) while Feldera keeps them, to read once there is
/// room, the newest waiting body first. Round 1: slotline is killed with its body held and
/// a new process starts; round 2: the same within one process. Either way the table's
/// newer changes must wait until Feldera read the held body, or the held body lands last
/// with its older value.
fn a_backpressured_body_is_read_before_the_replay(shell: Shell) {
    // Feldera keeps one endpoint (and queue) per table and parser configuration: the
    // other writer posts with slotline's parameters to share its queue.
    fn fill_slotline_s_endpoint(env: &Env, rows: &[serde_json::Value]) {
        let body: String = rows
            .iter()
            .map(|row| format!("{}\n", json!({ "insert": row })))
            .collect();
        let url = format!(
            "{}/v0/pipelines/p/ingress/users?format=json&update_format=insert_delete&lines=single",
            env.feldera.base_url()
        );
        let response = ureq::post(&url)
            .send(body.as_bytes())
            .expect("fill the queue");
        assert_eq!(response.status().as_u16(), 200);
    }
    let env = Env::new("backpressure", SETUP, schema());
    let config = [TABLES, LINGER_0];
    let mut connector = env.start(shell, &config);
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "not streaming:\n{}",
        connector.log_text()
    );
    env.sql("INSERT INTO users SELECT g, 'v0' FROM generate_series(1, 60) g");
    assert!(env.wait_caught_up(Duration::from_secs(30)));
    let filler: Vec<serde_json::Value> = (0..100_000)
        .map(|i| json!({"id": i % 60 + 1, "name": "v0"}))
        .collect();
    for round in 1..=2 {
        let held_503s = |env: &Env| {
            env.feldera
                .requests()
                .iter()
                .filter(|r| r.endpoint == "ingress" && r.status == 503)
                .count()
        };
        let before = held_503s(&env);
        env.feldera.set_completion_delay(CompletionDelay::Never);
        env.feldera.set_proxy_timeout(Duration::from_secs(30));
        fill_slotline_s_endpoint(&env, &filler);
        env.feldera.set_proxy_timeout(Duration::from_secs(2));
        env.sql(&format!("UPDATE users SET name = 'a{round}'"));
        assert!(
            wait_for(Duration::from_secs(30), || (held_503s(&env) > before)
                .then_some(()))
            .is_some(),
            "the manager never gave up on a body:\n{}",
            connector.log_text()
        );
        // From now on the manager waits: a request sent after this one is still waiting
        // when the queue drains, so if it went out it would be read first.
        env.feldera.set_proxy_timeout(Duration::from_secs(30));
        if round == 1 {
            connector.kill();
        }
        env.sql(&format!("UPDATE users SET name = 'b{round}'"));
        if round == 1 {
            connector = env.start(shell, &config);
            assert!(
                connector.wait_log(
                    "may hold a body an earlier process sent",
                    Duration::from_secs(30)
                ),
                "the start did not see the endpoint that may hold a body:\n{}",
                connector.log_text()
            );
        }
        // Time for a replay that does not wait to be sent, and to wait behind the held body.
        std::thread::sleep(Duration::from_secs(3));
        env.feldera
            .set_completion_delay(CompletionDelay::Fixed(Duration::ZERO));
        env.feldera.release_completions();
        assert!(
            env.wait_caught_up(Duration::from_secs(60)),
            "no catch-up after the queue drained:\n{}",
            connector.log_text()
        );
        // A body read after the replay would land within moments of it.
        std::thread::sleep(Duration::from_secs(1));
        env.assert_rows_equal("users", "users", "id");
    }
    assert_eq!(
        connector.stop(Duration::from_secs(15)),
        Some(0),
        "{}",
        connector.log_text()
    );
}

#[test]
fn a_backpressured_body_is_read_before_the_replay_tokio() {
    a_backpressured_body_is_read_before_the_replay(Shell::Tokio);
}

#[test]
fn a_backpressured_body_is_read_before_the_replay_blocking() {
    a_backpressured_body_is_read_before_the_replay(Shell::Blocking);
}
