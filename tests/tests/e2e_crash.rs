//! End to end: the crash matrix (DESIGN.md §5). For every streaming crash point and for the
//! 1st and 3rd batch, the process exits 70 at exactly that point, has acknowledged nothing
//! it had no right to, and a restart without crash variables catches up so that Feldera's
//! rows equal PostgreSQL's, value by value, each of weight 1.
//!
//! The slot is created before the workload is written, so the whole workload waits in the
//! slot and the first run replays it: no timing decides what a batch holds. With
//! `BATCH_LINGER_MS=0`, one table and one batch in flight (`MAX_IN_FLIGHT_BATCHES=1`), batch
//! k carries exactly transaction k (the stream stops reading at the next commit while a
//! batch is in flight), which makes the counts of ingress requests and the bounds on the
//! slot's position exact. Crashes with several batches in flight are decision traces
//! (`core/src/pipeline/tests/pipelining.rs`).

use serde_json::json;
use slotline_tests::e2e::{Env, Shell};
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

/// One transaction per entry (each `psql -c` is one transaction): inserts, a key-changing
/// update, deletes, the re-insert of a deleted key, a plain update, and a mix.
const WORKLOAD: [&str; 6] = [
    "INSERT INTO users VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')",
    "UPDATE users SET id = 40, name = 'd moved' WHERE id = 4",
    "DELETE FROM users WHERE id IN (1, 2)",
    "INSERT INTO users VALUES (1, 'a again')",
    "UPDATE users SET name = 'c2' WHERE id = 3",
    "INSERT INTO users VALUES (5, 'e'), (6, 'f'); DELETE FROM users WHERE id = 40",
];

fn ingress_calls(env: &Env) -> usize {
    env.feldera
        .requests()
        .iter()
        .filter(|r| r.endpoint == "ingress")
        .count()
}

fn crash_then_restart_catches_up(shell: Shell, point: &str, after: usize) {
    let env = Env::new("crash", SETUP, schema());
    // `ends[k]` is a position after transaction k's commit and before transaction k+1
    // (`ends[0]`: the slot's creation point, before the workload).
    let mut ends = vec![env.create_slot()];
    for transaction in WORKLOAD {
        env.sql(transaction);
        ends.push(env.wal_lsn());
    }
    let after_text = after.to_string();
    let mut crashing = env.start(
        shell,
        &[
            ("TABLES", "users"),
            ("BATCH_LINGER_MS", "0"),
            ("MAX_IN_FLIGHT_BATCHES", "1"),
            ("CRASH_AT", point),
            ("CRASH_AFTER_BATCHES", &after_text),
        ],
    );
    let code = crashing.wait_exit(Duration::from_secs(60));
    let log = crashing.log_text();
    assert_eq!(code, Some(70), "{log}");
    assert!(
        log.contains(&format!("crash injected at {point}")),
        "the log does not name the crash point:\n{log}"
    );

    // Batch k is transaction k: `before_send` crashes with k-1 batches sent, the others
    // after sending the k-th.
    let sent = if point == "before_send" {
        after - 1
    } else {
        after
    };
    assert_eq!(ingress_calls(&env), sent, "ingress calls before the crash");
    // Nothing past the last batch allowed to be acknowledged: before the ack point, the
    // crashing batch's transaction must not be confirmed.
    let acked = if point == "after_ack" {
        after
    } else {
        after - 1
    };
    assert!(
        env.slot_at_or_before(&ends[acked]),
        "the slot ({:?}) moved past transaction {acked} (ends at or before {}) before a crash at {point} #{after}",
        env.slot_confirmed(),
        ends[acked]
    );

    if point == "after_ack" {
        // The status update carrying the crashing batch's position was written before the
        // exit (the shells flush what the core handed them): the slot shows it.
        let moved = slotline_tests::pg::wait_for(Duration::from_secs(10), || {
            (!env.slot_at_or_before(&ends[after - 1])).then_some(())
        });
        assert!(
            moved.is_some(),
            "the after_ack status update did not reach PostgreSQL: slot {:?}, transaction {after} ends after {}",
            env.slot_confirmed(),
            ends[after - 1]
        );
    }

    let mut restarted = env.start(shell, &[("TABLES", "users"), ("BATCH_LINGER_MS", "0")]);
    assert!(
        env.wait_caught_up(Duration::from_secs(60)),
        "the restart did not catch up:\n{}",
        restarted.log_text()
    );
    // Caught up means every batch completed, i.e. was processed: the rows are there now.
    env.assert_rows_equal("users", "users", "id");
    assert_eq!(
        restarted.stop(Duration::from_secs(15)),
        Some(0),
        "{}",
        restarted.log_text()
    );
}

macro_rules! crash_case {
    ($name:ident, $point:literal, $after:literal) => {
        mod $name {
            use super::*;

            #[test]
            fn tokio() {
                crash_then_restart_catches_up(Shell::Tokio, $point, $after);
            }

            #[test]
            fn blocking() {
                crash_then_restart_catches_up(Shell::Blocking, $point, $after);
            }
        }
    };
}

crash_case!(
    crash_before_send_of_batch_1_then_restart_catches_up,
    "before_send",
    1
);
crash_case!(
    crash_before_send_of_batch_3_then_restart_catches_up,
    "before_send",
    3
);
crash_case!(
    crash_after_send_of_batch_1_then_restart_catches_up,
    "after_send",
    1
);
crash_case!(
    crash_after_send_of_batch_3_then_restart_catches_up,
    "after_send",
    3
);
crash_case!(
    crash_after_complete_of_batch_1_then_restart_catches_up,
    "after_complete",
    1
);
crash_case!(
    crash_after_complete_of_batch_3_then_restart_catches_up,
    "after_complete",
    3
);
crash_case!(
    crash_after_ack_of_batch_1_then_restart_catches_up,
    "after_ack",
    1
);
crash_case!(
    crash_after_ack_of_batch_3_then_restart_catches_up,
    "after_ack",
    3
);
