//! Sessions end without acknowledging; the next starts after a backoff; only durable
//! progress resets it; no progress for too long exits 69; fatal errors exit 1 at once.
use super::*;
use crate::Lsn;

#[test]
fn completion_timeout_starts_a_new_session_without_acknowledging() {
    let mut s = streaming(&[
        ("BATCH_LINGER_MS", "0"),
        ("FELDERA_COMPLETION_TIMEOUT_MS", "1000"),
    ]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.accept();
    for _ in 0..30 {
        if s.waiting_requests() > 0 {
            s.in_progress();
        }
        s.advance(50);
    }
    assert_eq!(s.confirmed, START);
    let trace = s.take_trace();
    let shown: Vec<&str> = trace
        .lines()
        .filter(|l| {
            !l.contains("completion_status") && !l.contains("inprogress") && !l.contains("next")
        })
        .collect();
    insta::assert_snapshot!(shown.join("\n"));
}

#[test]
fn feldera_503_ends_the_session_and_reconnects_after_a_backoff() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.answer(
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    );
    s.advance(1000);
    assert_eq!(s.confirmed, START);
    insta::assert_snapshot!(s.take_trace());
}

#[test]
fn backoff_grows_without_progress_and_resets_only_on_durable_progress() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    let mut delays = Vec::new();
    for round in 0..4 {
        s.disconnect();
        let trace = s.take_trace();
        let delay = trace
            .lines()
            .find_map(|l| l.split("reconnecting in ").nth(1))
            .unwrap()
            .to_owned();
        delays.push(format!("failure {round}: {delay}"));
        s.advance(31_000);
        s.wal(
            "Relation users",
            &[relation(&users(ReplicaIdentity::Default))],
        );
    }
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.settle();
    s.disconnect();
    let trace = s.take_trace();
    let delay = trace
        .lines()
        .find_map(|l| l.split("reconnecting in ").nth(1))
        .unwrap()
        .to_owned();
    delays.push(format!("after progress: {delay}"));
    insta::assert_snapshot!(delays.join("\n"));
}

#[test]
fn no_durable_progress_for_too_long_exits_69() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0"), ("NO_PROGRESS_TIMEOUT_SECS", "5")]);
    let mut replayed_in = 1;
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    for _ in 0..100 {
        if s.waiting_requests() > 0 {
            s.answer(
                503,
                r#"{"message":"down","error_code":"PipelineUnavailable","details":{}}"#,
            );
        }
        s.advance(250);
        if s.exit().is_some() {
            break;
        }
        // Every new session replays the unacknowledged transaction from the slot.
        let status = s.pipeline().status();
        if status.streaming && status.sessions > replayed_in {
            replayed_in = status.sessions;
            s.wal(
                "Relation users",
                &[relation(&users(ReplicaIdentity::Default))],
            );
            insert_tx(&mut s, 700, 0x2100, &["1"]);
        }
    }
    assert_eq!(s.exit().map(|e| e.0), Some(69));
    assert_eq!(s.confirmed, START);
    let trace = s.take_trace();
    let shown: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("exit") || l.contains("ended"))
        .collect();
    insta::assert_snapshot!(shown.join("\n"));
}

#[test]
fn restarted_pipeline_410_starts_a_new_session_and_replays() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.accept();
    s.answer(
        410,
        r#"{"message":"pipeline restarted","error_code":"PipelineRestarted","details":{}}"#,
    );
    s.advance(1000);
    // The slot replays the transaction in the new session.
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.settle();
    assert_eq!(s.confirmed, Lsn(0x2100));
    insta::assert_snapshot!(s.take_trace());
}

fn crash_trace(point: &str, after: &str) -> String {
    let mut s = streaming(&[
        ("BATCH_LINGER_MS", "0"),
        ("CRASH_AT", point),
        ("CRASH_AFTER_BATCHES", after),
    ]);
    for (i, end) in [0x2100u64, 0x2200, 0x2300].iter().enumerate() {
        insert_tx(&mut s, 700 + i as u32, *end, &[&(i + 1).to_string()]);
        s.settle();
        if s.exit().is_some() {
            break;
        }
    }
    assert_eq!(s.exit().map(|e| e.0), Some(70), "{point} x {after}");
    s.take_trace()
}

#[test]
fn crash_points_exit_70_at_the_nth_batch() {
    let mut all = String::new();
    for point in ["before_send", "after_send", "after_complete", "after_ack"] {
        for after in ["1", "3"] {
            let trace = crash_trace(point, after);
            let tail: Vec<&str> = trace
                .lines()
                .rev()
                .take(3)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            all.push_str(&format!(
                "== CRASH_AT={point} CRASH_AFTER_BATCHES={after}\n{}\n",
                tail.join("\n")
            ));
        }
    }
    insta::assert_snapshot!(all);
}

#[test]
fn a_slot_still_held_by_a_dead_connection_is_retried_not_fatal() {
    let mut pg = pg();
    pg.slot_busy_answers = 2;
    let mut s = Script::new(&[TABLES], pg, SCHEMA);
    s.advance(1000);
    assert_eq!(s.exit(), None);
    assert!(s.pipeline().status().streaming);
    let trace = s.take_trace();
    let shown: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("log ") || l.contains("START_REPLICATION"))
        .collect();
    insta::assert_snapshot!(shown.join("\n"));
}
