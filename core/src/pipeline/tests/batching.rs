//! When batches are cut, and how the session stays alive while Feldera is slow.
use super::*;
use crate::Lsn;

#[test]
fn linger_deadline_counts_from_the_oldest_event_under_a_trickle() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "50")]);
    for (i, end) in [0x2100u64, 0x2200, 0x2300, 0x2400, 0x2500]
        .iter()
        .enumerate()
    {
        insert_tx(&mut s, 700 + i as u32, *end, &[&(i + 1).to_string()]);
        s.advance(15);
    }
    // The first commit finds nothing in flight and goes at once; its request stays
    // unanswered, so the next ones linger. The oldest of them arrived at +0.015s: the
    // batch goes at +0.065s although events kept arriving every 15 ms.
    let trace = s.take_trace();
    assert!(trace.contains("#1 cut (idle)"), "{trace}");
    assert!(trace.contains("#2 cut (linger): 4 rows"), "{trace}");
    rule!(
        "With a batch in flight, the linger deadline counts from the oldest buffered event: under a trickle every 15 ms the batch behind the first (sent at once) still goes 50 ms after its oldest event.",
        trace
    );
}

#[test]
fn linger_zero_sends_one_request_per_transaction() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    insert_tx(&mut s, 700, 0x2100, &["1", "2"]);
    insert_tx(&mut s, 701, 0x2200, &["3"]);
    // Each commit cuts a batch; the second batch's request to users goes out once the
    // first one's was answered: one request per transaction, in order.
    s.settle();
    assert_eq!(s.confirmed, Lsn(0x2200));
    rule!(
        "BATCH_LINGER_MS=0 cuts a batch at every commit: one ingress request per transaction, in order.",
        s.take_trace()
    );
}

#[test]
fn row_and_byte_thresholds_split_batches() {
    let mut s = streaming(&[("BATCH_MAX_ROWS", "3"), ("BATCH_LINGER_MS", "1000")]);
    insert_tx(&mut s, 700, 0x2100, &["1", "2", "3", "4"]);
    s.settle();
    s.advance(1000);
    s.settle();
    assert_eq!(s.confirmed, Lsn(0x2100));
    let rows = s.take_trace();
    let mut s = streaming(&[("BATCH_MAX_BYTES", "1024"), ("BATCH_LINGER_MS", "1000")]);
    let big = "x".repeat(700);
    s.wal(
        "tx 700: three 700-byte rows",
        &[
            begin(0x2100, 700),
            insert(0x2010, 16384, &[Some("1"), Some(&big), None]),
            insert(0x2020, 16384, &[Some("2"), Some(&big), None]),
            insert(0x2030, 16384, &[Some("3"), Some(&big), None]),
            commit(0x20F8, 0x2100),
        ],
    );
    s.settle();
    s.advance(1000);
    s.settle();
    assert_eq!(s.confirmed, Lsn(0x2100));
    rule!(
        "BATCH_MAX_ROWS and BATCH_MAX_BYTES each cut a batch as soon as they are reached; the rest lingers behind it and goes once it is durable and nothing else is in flight.",
        format!(
        "BATCH_MAX_ROWS=3:\n{rows}\nBATCH_MAX_BYTES=1024:\n{}",
        s.take_trace()
    )
    );
}

#[test]
fn short_wal_sender_timeout_keeps_status_updates_flowing_through_a_long_completion_wait() {
    let mut s = Script::streaming(
        &[TABLES, ("BATCH_LINGER_MS", "0")],
        pg_with(ReplicaIdentity::Default, "4s"),
        SCHEMA,
    );
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.accept();
    s.take_trace();
    // Feldera answers "in progress" for 22 s, then "complete".
    for _ in 0..400 {
        if s.waiting_requests() > 0 {
            s.in_progress();
        }
        s.advance(55);
    }
    while s.waiting_requests() == 0 {
        s.advance(10);
    }
    s.complete();
    let trace = s.take_trace();
    let statuses = trace.lines().filter(|l| l.contains(" status ")).count();
    let sessions = s.pipeline().health().sessions;
    assert!(statuses >= 5, "{statuses} status updates in 22 s:\n{trace}");
    assert_eq!(sessions, 1, "one session, no reconnect");
    assert_eq!(s.confirmed, Lsn(0x2100));
    let summary: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains(" status ") || l.contains("log "))
        .collect();
    rule!(
        "With wal_sender_timeout=4s, status updates go every 1.333 s through a 22 s completion wait, so PostgreSQL never closes the session (only status updates and log lines shown).",
        summary.join("\n")
    );
}
