//! Graceful stop: drain, final status update, confirm on a second connection, exit 0.
use super::*;
use crate::Lsn;

#[test]
fn graceful_stop_drains_reports_and_confirms_the_final_position() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "5000")]);
    insert_tx(&mut s, 700, 0x2100, &["1", "2"]);
    s.shutdown();
    s.settle();
    assert_eq!(s.exit().map(|e| e.0), Some(0));
    assert_eq!(s.confirmed, Lsn(0x2100));
    insta::assert_snapshot!(s.take_trace());
}

#[test]
fn graceful_stop_with_nothing_new_exits_at_once() {
    let mut s = streaming(&[]);
    s.shutdown();
    insta::assert_snapshot!(s.take_trace());
    assert_eq!(s.exit().map(|e| e.0), Some(0));
}

#[test]
fn graceful_stop_gives_up_waiting_for_the_slot_after_shutdown_confirm_ms() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0"), ("SHUTDOWN_CONFIRM_MS", "300")]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.shutdown();
    s.accept();
    // The status update is lost on the way: the slot keeps showing the old position.
    s.freeze_confirmed();
    s.complete();
    s.advance(1000);
    assert_eq!(s.exit().map(|e| e.0), Some(0));
    insta::assert_snapshot!(s.take_trace());
}
