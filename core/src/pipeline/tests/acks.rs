//! Which position is acknowledged, and when.
use super::*;
use crate::Lsn;

#[test]
fn flush_position_moves_only_after_completion_and_is_the_commit_end_lsn() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    insert_tx(&mut s, 700, 0x2100, &["1", "2"]);
    s.accept();
    s.advance(3);
    assert_eq!(s.confirmed, START, "accepted is not durable");
    s.complete();
    assert_eq!(s.confirmed, Lsn(0x2100), "end_lsn, not commit_lsn 0x20F8");
    rule!(
        "The flush position moves only when Feldera says the batch is complete (not on HTTP 200), and it is the commit's end_lsn (0/2100), never its commit_lsn.",
        s.take_trace()
    );
}

#[test]
fn received_position_is_wal_start_never_wal_end() {
    let mut s = streaming(&[]);
    s.wal("Begin", &[begin(0x2100, 700)]);
    // The harness's server puts its WAL head 0x10000 bytes past each record it sends.
    s.wal(
        "Insert users 1 (wal_start 0/2040, wal_end 0/12040)",
        &[insert(0x2040, 16384, &[Some("1"), None, None])],
    );
    s.advance(10_000);
    let trace = s.take_trace();
    assert!(trace.contains("status write=0/2040 "), "{trace}");
    assert!(!trace.contains("write=0/12040"), "{trace}");
    rule!(
        "The write position reported is where the last record read started (wal_start 0/2040), never the server's WAL head carried in the same message (wal_end).",
        trace
    );
}

#[test]
fn commit_with_rows_still_buffered_is_not_acknowledged() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "5000")]);
    // tx 699 goes out at once (nothing in flight) and stays unanswered, so tx 700's row
    // lingers behind it.
    insert_tx(&mut s, 699, 0x2000, &["0"]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.keepalive(Lsn(0x2100), true);
    assert_eq!(s.confirmed, START);
    let trace = s.take_trace();
    assert!(
        trace.contains("#1 cut (idle)") && !trace.contains("#2 cut"),
        "{trace}"
    );
    rule!(
        "A commit whose rows are still buffered (lingering behind a batch in flight) is not acknowledged, even when a keepalive asks for a reply: the reply carries the old flush position.",
        trace
    );
}

#[test]
fn transaction_split_over_three_batches_is_acknowledged_only_after_the_last() {
    let mut s = streaming(&[("BATCH_MAX_ROWS", "2"), ("BATCH_LINGER_MS", "50")]);
    insert_tx(&mut s, 700, 0x2100, &["1", "2", "3", "4", "5"]);
    assert_eq!(s.confirmed, START);
    s.settle();
    assert_eq!(s.confirmed, Lsn(0x2100));
    let trace = s.take_trace();
    // The last row lingers behind the two batches in flight and goes once they are
    // durable; the commit waits for it.
    let third = trace.find("#3 durable").expect("a third batch");
    let acked = trace.find("flush=0/2100").expect("the commit acknowledged");
    assert!(third < acked, "{trace}");
    assert!(trace.contains("#3 cut (idle)"), "{trace}");
    rule!(
        "A transaction larger than BATCH_MAX_ROWS goes out in three batches (the last once the first two are durable and nothing else is in flight); its commit is acknowledged only when the last of them is durable.",
        trace
    );
}

#[test]
fn idle_keepalive_is_acknowledged_releasing_unpublished_wal() {
    let mut s = streaming(&[]);
    s.keepalive(Lsn(0x5_0000), false);
    assert_eq!(s.confirmed, Lsn(0x5_0000));
    rule!(
        "With nothing open, buffered or in flight, a keepalive's position is acknowledged, releasing WAL written to unpublished tables.",
        s.take_trace()
    );
}

#[test]
fn keepalive_is_ignored_with_an_open_transaction_or_a_batch_in_flight() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    s.wal("Begin", &[begin(0x2100, 700)]);
    s.keepalive(Lsn(0x3000), false);
    assert_eq!(s.confirmed, START, "open transaction");
    s.wal(
        "Insert, Commit",
        &[
            insert(0x2040, 16384, &[Some("1"), None, None]),
            commit(0x20F8, 0x2100),
        ],
    );
    s.keepalive(Lsn(0x3000), false);
    assert_eq!(s.confirmed, START, "batch in flight");
    s.accept();
    s.complete();
    s.keepalive(Lsn(0x3000), false);
    assert_eq!(s.confirmed, Lsn(0x3000), "idle again");
    rule!(
        "A keepalive moves nothing while a transaction is open or a batch is in flight; once idle, the next one is acknowledged.",
        s.take_trace()
    );
}

#[test]
fn keepalive_asking_for_a_reply_is_answered_at_once() {
    let mut s = streaming(&[]);
    s.wal("Begin", &[begin(0x2100, 700)]);
    s.keepalive(Lsn(0x3000), true);
    rule!(
        "A keepalive asking for a reply is answered at once with the current positions.",
        s.take_trace()
    );
}

#[test]
fn accepted_mode_acknowledges_on_http_200() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0"), ("FELDERA_ACK_MODE", "accepted")]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.accept();
    assert_eq!(s.confirmed, Lsn(0x2100));
    assert_eq!(
        s.waiting_requests(),
        0,
        "no completion poll in accepted mode"
    );
    rule!(
        "FELDERA_ACK_MODE=accepted (unsafe, for demonstration) acknowledges on ingress's HTTP 200 without asking for completion.",
        s.take_trace()
    );
}
