//! Issue 6 parity: one scripted scenario (a Feldera outage, a crash point, a graceful stop)
//! through the real binaries of both shells gives the same sequence of decisions.
//!
//! The decisions are the core's own log lines (`RUST_LOG=slotline=debug`): sessions, batches
//! cut and made durable, flush positions, session ends and exits. Timing is removed, and so is
//! what differs between two databases on one cluster by construction: LSN values become
//! symbols in order of first appearance, and slot names and the double's address
//! placeholders. Idle keepalive
//! acknowledgements are left out: when a keepalive arrives is the server's timing.

use serde_json::json;
use slotline_tests::e2e::{Env, Shell};
use slotline_tests::feldera_double::FailMode;
use std::collections::BTreeMap;
use std::time::Duration;

fn schema() -> serde_json::Value {
    json!({"inputs": [
        {"name": "users", "case_sensitive": false, "primary_key": ["id"], "materialized": false, "properties": {},
         "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "name", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": true, "precision": -1}}]}
    ], "outputs": []})
}

const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text); CREATE PUBLICATION pub FOR TABLE users;";

/// Runs the scenario with `shell` and returns its normalised decisions.
fn scenario(shell: Shell) -> Vec<String> {
    let env = Env::new("parity", SETUP, schema());
    // One batch in flight: with more, when a batch is cut relative to another's completion
    // is I/O timing, not a decision.
    let base = [
        ("TABLES", "users"),
        ("BATCH_LINGER_MS", "0"),
        ("MAX_IN_FLIGHT_BATCHES", "1"),
        ("SLOTLINE_SEED", "7"),
        ("RUST_LOG", "slotline=debug"),
    ];
    // The slot exists before the workload, so the whole workload is streamed in one go.
    let mut first = env.start(
        shell,
        &[
            base.as_slice(),
            &[("CRASH_AT", "after_complete"), ("CRASH_AFTER_BATCHES", "3")],
        ]
        .concat(),
    );
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "{}",
        first.log_text()
    );
    // An outage on the first batch (the lost-response kind: applied, then 503).
    env.feldera.fail_next_ingress(1, FailMode::AfterApply);
    for i in 1..=5 {
        env.sql(&format!("INSERT INTO users VALUES ({i}, 'user {i}')"));
    }
    assert_eq!(
        first.wait_exit(Duration::from_secs(60)),
        Some(70),
        "{}",
        first.log_text()
    );
    let mut log = first.log_text();
    let mut second = env.start(shell, &base);
    assert!(
        env.wait_caught_up(Duration::from_secs(30)),
        "{}",
        second.log_text()
    );
    assert_eq!(env.feldera_rows("users", "id"), env.pg_rows("users", "id"));
    assert_eq!(
        second.stop(Duration::from_secs(15)),
        Some(0),
        "{}",
        second.log_text()
    );
    log.push_str(&second.log_text());
    normalise(&log, &env.slot_name(), &env.feldera.base_url())
}

fn normalise(log: &str, slot: &str, feldera: &str) -> Vec<String> {
    let mut symbols: BTreeMap<String, String> = BTreeMap::new();
    let mut lines = Vec::new();
    for line in log.lines() {
        // `<timestamp> <LEVEL> <message>`: drop the timestamp.
        let Some((_, rest)) = line.split_once(' ') else {
            continue;
        };
        let rest = rest.trim_start();
        let message = rest.split_once(' ').map_or("", |(_, m)| m).trim_start();
        let keep = [
            "session ",
            "batch: #",
            "ack: flush",
            "policy: ",
            "created replication slot",
            "streaming from slot",
            "exiting with code",
            "crash injected",
        ]
        .iter()
        .any(|p| message.starts_with(p) || message.contains(p));
        // Idle acknowledgements depend on when the server sends keepalives.
        if !keep || message.contains("idle keepalive") {
            continue;
        }
        let mut out = message
            .replace(slot, "<slot>")
            .replace(feldera, "<feldera>");
        // Reconnect delays come from the seeded RNG and are the same; LSNs are not.
        let words: Vec<String> = out.split(' ').map(str::to_owned).collect();
        for word in words {
            let trimmed = word.trim_matches(|c: char| !c.is_ascii_hexdigit() && c != '/');
            let is_lsn = trimmed.split_once('/').is_some_and(|(a, b)| {
                !a.is_empty()
                    && !b.is_empty()
                    && a.chars().all(|c| c.is_ascii_hexdigit())
                    && b.chars().all(|c| c.is_ascii_hexdigit())
            });
            if is_lsn {
                let next = format!("L{}", symbols.len() + 1);
                let symbol = symbols.entry(trimmed.to_owned()).or_insert(next).clone();
                out = out.replace(trimmed, &symbol);
            }
        }
        lines.push(format!("{} {out}", rest.split(' ').next().unwrap_or("")));
    }
    lines
}

#[test]
fn both_shells_make_the_same_decisions_for_the_same_scenario() {
    let tokio = scenario(Shell::Tokio);
    let blocking = scenario(Shell::Blocking);
    assert!(
        tokio.iter().any(|l| l.contains("exiting with code 70")),
        "{tokio:#?}"
    );
    assert!(
        tokio.iter().any(|l| l.contains("ended:")),
        "the outage ended a session: {tokio:#?}"
    );
    assert_eq!(tokio, blocking);
    insta::assert_snapshot!(tokio.join("\n"));
}
