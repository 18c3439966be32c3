//! Graceful stop: drain, final status update, confirm on a second connection, exit 0.
use super::*;
use crate::Lsn;

#[test]
fn graceful_stop_drains_reports_and_confirms_the_final_position() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "5000")]);
    // tx 699 goes out at once and stays unanswered; tx 700 lingers behind it.
    insert_tx(&mut s, 699, 0x2000, &["0"]);
    insert_tx(&mut s, 700, 0x2100, &["1", "2"]);
    s.shutdown();
    s.settle();
    assert_eq!(s.exit().map(|e| e.0), Some(0));
    assert_eq!(s.confirmed, Lsn(0x2100));
    let trace = s.take_trace();
    assert!(trace.contains("#2 cut (drain): 2 rows"), "{trace}");
    rule!(
        "A graceful stop stops reading, awaits the batch in flight, sends what is buffered, reports the final position and reads the slot on a second connection until it shows it; exit 0.",
        trace
    );
}

#[test]
fn graceful_stop_with_nothing_new_exits_at_once() {
    let mut s = streaming(&[]);
    s.shutdown();
    rule!(
        "A graceful stop with nothing new since the slot's position exits 0 at once.",
        s.take_trace()
    );
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
    rule!(
        "When the slot does not show the final position within SHUTDOWN_CONFIRM_MS, the stop gives up waiting, warns, and exits 0.",
        s.take_trace()
    );
}
