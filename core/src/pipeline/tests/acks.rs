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
    insta::assert_snapshot!(s.take_trace());
}

#[test]
fn received_position_is_wal_start_never_wal_end() {
    let mut s = streaming(&[]);
    s.keepalive(Lsn(0x9000), false); // the server's WAL head moves far ahead...
    s.take_trace();
    let mut s = streaming(&[]);
    s.wal("Begin", &[begin(0x2100, 700)]);
    s.wal(
        "Insert users 1",
        &[insert(0x2040, 16384, &[Some("1"), None, None])],
    );
    s.advance(10_000);
    // write= is where the last record started (0/2040), not the wal_end of its message.
    insta::assert_snapshot!(s.take_trace());
}

#[test]
fn commit_with_rows_still_buffered_is_not_acknowledged() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "5000")]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.keepalive(Lsn(0x2100), true);
    assert_eq!(s.confirmed, START);
    insta::assert_snapshot!(s.take_trace());
}

#[test]
fn transaction_split_over_three_batches_is_acknowledged_only_after_the_last() {
    let mut s = streaming(&[("BATCH_MAX_ROWS", "2"), ("BATCH_LINGER_MS", "50")]);
    insert_tx(&mut s, 700, 0x2100, &["1", "2", "3", "4", "5"]);
    for _ in 0..2 {
        s.accept();
        s.complete();
        assert_eq!(
            s.confirmed, START,
            "the commit's last row is not durable yet"
        );
    }
    s.advance(50);
    s.accept();
    s.complete();
    assert_eq!(s.confirmed, Lsn(0x2100));
    insta::assert_snapshot!(s.take_trace());
}

#[test]
fn idle_keepalive_is_acknowledged_releasing_unpublished_wal() {
    let mut s = streaming(&[]);
    s.keepalive(Lsn(0x5_0000), false);
    assert_eq!(s.confirmed, Lsn(0x5_0000));
    insta::assert_snapshot!(s.take_trace());
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
    insta::assert_snapshot!(s.take_trace());
}

#[test]
fn keepalive_asking_for_a_reply_is_answered_at_once() {
    let mut s = streaming(&[]);
    s.wal("Begin", &[begin(0x2100, 700)]);
    s.keepalive(Lsn(0x3000), true);
    insta::assert_snapshot!(s.take_trace());
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
    insta::assert_snapshot!(s.take_trace());
}
