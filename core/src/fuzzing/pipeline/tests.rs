//! The harness's checks fail when they should: each test breaks one rule by hand.

use super::input::{Event, Setup};
use super::pg::START;
use super::Harness;
use crate::io::{Command, ConnId};
use crate::Lsn;
use bytes::Bytes;

use Event::*;

const GOOD: Event = Answer { pick: 0, class: 0 };

fn after(events: &[Event]) -> Harness {
    let mut harness = Harness::start(&Setup::default());
    harness.settle();
    for event in events {
        harness.apply(event);
        harness.settle();
    }
    harness
}

/// Streaming, with a three-row transaction accepted by ingress but not completed.
fn accepted_not_completed() -> Harness {
    after(&[GOOD, Deliver(0), Tx(vec![0, 0, 0]), Deliver(0), GOOD])
}

#[test]
fn the_world_reaches_streaming_and_an_accepted_batch() {
    let harness = accepted_not_completed();
    assert_eq!(harness.pg.streams_started, 1);
    assert_eq!(harness.pipeline.status().batch_in_flight, Some(1));
    assert_eq!(harness.pg.wal.len(), 1);
}

#[test]
#[should_panic(expected = "Feldera has not made durable")]
fn a_flush_past_a_commit_not_yet_durable_is_caught() {
    let mut harness = accepted_not_completed();
    let end = harness.pg.wal[0].end;
    harness.check_flush(end, "a hand-made flush");
}

#[test]
#[should_panic(expected = "not a commit end, idle keepalive or slot position")]
fn a_flush_at_a_position_never_received_is_caught() {
    let mut harness = accepted_not_completed();
    harness.check_flush(Lsn(START.0 + 1), "a hand-made flush");
}

#[test]
#[should_panic(expected = "the flush position went backwards")]
fn a_flush_that_goes_backwards_is_caught() {
    let mut harness = after(&[GOOD, Deliver(0), Tx(vec![0, 0, 0]), Deliver(0), GOOD, GOOD]);
    assert!(harness.run.reported_flush > START, "{:?}", harness.run);
    harness.on_status_update(START);
}

#[test]
#[should_panic(expected = "exit 0 without a stop request")]
fn exit_0_without_a_stop_is_caught() {
    let mut harness = after(&[GOOD]);
    harness.execute(Command::Exit {
        code: 0,
        reason: "done".into(),
    });
}

#[test]
#[should_panic(expected = "after it was closed")]
fn a_write_to_a_closed_connection_is_caught() {
    let mut harness = after(&[GOOD]);
    harness.execute(Command::PgClose { conn: ConnId(1) });
    harness.execute(Command::PgWrite {
        conn: ConnId(1),
        bytes: Bytes::from_static(b"X\0\0\0\x04"),
    });
}

#[test]
#[should_panic(expected = "a secret in the output")]
fn a_secret_in_a_log_line_is_caught() {
    let mut harness = after(&[]);
    harness.execute(Command::Log {
        topic: crate::io::Topic::General,
        level: crate::io::Level::Info,
        message: format!("connecting with {}", super::PG_PASSWORD),
    });
}
