//! CopyBoth replication streaming scripts.

use super::*;
use crate::time::PgTime;
use crate::wire::replication::{PrimaryKeepalive, ReplicationMessage, XLogData};
use crate::wire::testing::replication_frame;
use crate::Lsn;

fn xlog(start: u64, end: u64, data: &'static [u8]) -> Vec<u8> {
    replication_frame(&ReplicationMessage::XLogData(XLogData {
        wal_start: Lsn(start),
        wal_end: Lsn(end),
        server_time: PgTime(1_000),
        data: Bytes::from_static(data),
    }))
}

fn keepalive(end: u64, reply_requested: bool) -> Vec<u8> {
    replication_frame(&ReplicationMessage::Keepalive(PrimaryKeepalive {
        wal_end: Lsn(end),
        server_time: PgTime(2_000),
        reply_requested,
    }))
}

fn status(lsn: u64) -> StatusUpdate {
    StatusUpdate {
        write: Lsn(lsn),
        flush: Lsn(lsn),
        apply: Lsn(lsn),
        client_time: PgTime(3_000),
        reply_requested: false,
    }
}

/// START_REPLICATION, data, a status update, a clean stop with a keepalive after the
/// server's CopyDone, and the connection ready again.
fn streaming_script(bytewise: bool) -> Harness {
    let mut h = ready_harness(bytewise, true);
    h.conn
        .query(
            "START_REPLICATION SLOT s LOGICAL 0/0 (proto_version '1', publication_names '\"p\"')",
        )
        .unwrap();
    h.drain();
    let mut start = encode_backend(&BackendMessage::CopyBothResponse(copy_response(0)));
    start.extend(keepalive(0x100, false));
    h.server_bytes(&start);
    assert_eq!(h.conn.phase(), Phase::Streaming);
    let mut data = xlog(0, 0x1A0, b"R...relation");
    data.extend(xlog(0x150, 0x1A0, b"B...begin"));
    data.extend(keepalive(0x1A0, true));
    h.server_bytes(&data);
    h.conn.send_status_update(status(0x1A0)).unwrap();
    h.drain();
    h.conn.finish_stream().unwrap();
    h.drain();
    let mut stop = encode_backend(&BackendMessage::CopyDone);
    stop.extend(keepalive(0x1B0, false));
    h.server_bytes(&stop);
    assert_eq!(h.conn.phase(), Phase::Streaming);
    h.server(&[
        complete("START_REPLICATION"),
        ready(TransactionStatus::Idle),
    ]);
    assert_eq!(h.conn.phase(), Phase::Ready);
    h
}

#[test]
fn streaming_reports_wal_and_keepalives_and_stops_cleanly() {
    let trace = run_both(streaming_script);
    insta::assert_snapshot!(trace, @r#"
    -> Query "START_REPLICATION SLOT s LOGICAL 0/0 (proto_version '1', publication_names '\"p\"')"
       stream started
       keepalive end=0/100 time=2000 reply=false
       xlog start=0/0 end=0/1A0 time=1000 data="R...relation"
       xlog start=0/150 end=0/1A0 time=1000 data="B...begin"
       keepalive end=0/1A0 time=2000 reply=true
    -> StatusUpdate write=0/1A0 flush=0/1A0 apply=0/1A0 time=3000 reply=false
    -> CopyDone
       stream server done
       keepalive end=0/1B0 time=2000 reply=false
       complete START_REPLICATION
       query done Idle
    "#);
}

#[test]
fn the_startup_of_a_replication_connection_asks_for_replication_database() {
    let h = Harness::new(
        ConnectionConfig {
            replication: true,
            ..config(None)
        },
        false,
    );
    assert!(
        h.trace[0].contains(" replication=database "),
        "{}",
        h.trace[0]
    );
}

#[test]
fn xlog_payloads_point_into_the_received_bytes() {
    let mut h = ready_harness(false, true);
    h.conn
        .query("START_REPLICATION SLOT s LOGICAL 0/0")
        .unwrap();
    h.drain();
    h.server(&[BackendMessage::CopyBothResponse(copy_response(0))]);
    h.conn.handle_bytes(&xlog(1, 2, b"payload"));
    let Some(Event::XLogData(x)) = h.conn.poll_event() else {
        panic!("expected XLogData");
    };
    assert_eq!(&x.data[..], b"payload");
}

#[test]
fn the_server_may_end_the_stream_first_and_the_client_answers() {
    let mut h = ready_harness(false, true);
    h.conn
        .query("START_REPLICATION SLOT s LOGICAL 0/0")
        .unwrap();
    h.server(&[
        BackendMessage::CopyBothResponse(copy_response(0)),
        BackendMessage::CopyDone,
    ]);
    h.conn.send_status_update(status(5)).unwrap();
    h.conn.finish_stream().unwrap();
    assert_eq!(
        h.conn.finish_stream(),
        Err(UsageError::StreamAlreadyFinished)
    );
    assert_eq!(
        h.conn.send_status_update(status(6)),
        Err(UsageError::StreamAlreadyFinished)
    );
    h.drain();
    h.server(&[complete("COPY 0"), ready(TransactionStatus::Idle)]);
    assert_eq!(h.conn.phase(), Phase::Ready);
    assert_eq!(
        h.conn.send_status_update(status(7)),
        Err(UsageError::NotStreaming {
            phase: Phase::Ready
        })
    );
}

#[test]
fn an_error_while_streaming_ends_the_query_and_the_connection_is_ready() {
    let mut h = ready_harness(true, true);
    h.conn
        .query("START_REPLICATION SLOT s LOGICAL 0/0")
        .unwrap();
    h.drain();
    h.trace.clear();
    h.server(&[
        BackendMessage::CopyBothResponse(copy_response(0)),
        error(
            "ERROR",
            "55000",
            "replication slot \"s\" is active for PID 1",
        ),
        ready(TransactionStatus::Idle),
    ]);
    insta::assert_snapshot!(h.text(), @r#"
       stream started
       query error ERROR 55000: replication slot "s" is active for PID 1
       query done Idle
    "#);
}

#[test]
fn broken_replication_payloads_latch_with_the_stream_offset() {
    let mut h = ready_harness(false, true);
    h.conn
        .query("START_REPLICATION SLOT s LOGICAL 0/0")
        .unwrap();
    h.server(&[BackendMessage::CopyBothResponse(copy_response(0))]);
    let before: usize = trust_startup()
        .iter()
        .chain([&BackendMessage::CopyBothResponse(copy_response(0))])
        .map(|m| encode_backend(m).len())
        .sum();
    h.trace.clear();
    h.server(&[BackendMessage::CopyData(Bytes::from_static(b"z123"))]);
    h.server_bytes(&keepalive(1, false));
    insta::assert_snapshot!(h.text(), @"   FAILED malformed backend message at stream byte 79: decode error at byte 5: unknown replication CopyData (w XLogData or k keepalive) tag 'z' (0x7A)");
    // 71 bytes of startup reply (9 + 25 + 18 + 13 + 6) and 8 of CopyBothResponse.
    assert_eq!(before, 79);

    // A second CopyDone from the server is a violation too.
    let mut h = ready_harness(false, true);
    h.conn
        .query("START_REPLICATION SLOT s LOGICAL 0/0")
        .unwrap();
    h.server(&[
        BackendMessage::CopyBothResponse(copy_response(0)),
        BackendMessage::CopyDone,
        BackendMessage::CopyDone,
    ]);
    assert!(matches!(
        h.conn.error(),
        Some(ConnError::Unexpected {
            message: "CopyDone",
            ..
        })
    ));
}

#[test]
fn close_while_streaming_sends_terminate() {
    let mut h = ready_harness(false, true);
    h.conn
        .query("START_REPLICATION SLOT s LOGICAL 0/0")
        .unwrap();
    h.server(&[BackendMessage::CopyBothResponse(copy_response(0))]);
    h.drain();
    h.trace.clear();
    h.conn.close();
    h.drain();
    assert_eq!(h.text(), "-> Terminate");
}
