//! Simple query scripts: rows, several statements, errors, COPY OUT, misuse.

use super::*;

#[test]
fn a_multi_statement_query_reports_each_statement_then_done() {
    let trace = run_both(|bytewise| {
        let mut h = ready_harness(bytewise, false);
        h.conn
            .query("SET x = 1; SELECT id, name FROM t; ;")
            .unwrap();
        assert_eq!(h.conn.phase(), Phase::Busy);
        h.drain();
        h.server(&[
            complete("SET"),
            columns(&[("id", 23), ("name", 25)]),
            row(&[Some("1"), Some("one")]),
            row(&[Some("2"), None]),
            complete("SELECT 2"),
            BackendMessage::EmptyQueryResponse,
            ready(TransactionStatus::Idle),
        ]);
        assert_eq!(h.conn.phase(), Phase::Ready);
        h
    });
    insta::assert_snapshot!(trace, @r#"
    -> Query "SET x = 1; SELECT id, name FROM t; ;"
       complete SET
       columns id:23 name:25
       row 1 | one
       row 2 | NULL
       complete SELECT 2
       empty query
       query done Idle
    "#);
}

#[test]
fn an_error_mid_query_is_an_event_and_the_connection_is_ready_again() {
    let trace = run_both(|bytewise| {
        let mut h = ready_harness(bytewise, false);
        h.conn.query("SELECT 1/0 FROM t").unwrap();
        h.drain();
        h.server(&[
            columns(&[("?column?", 23)]),
            row(&[Some("1")]),
            error("ERROR", "22012", "division by zero"),
            ready(TransactionStatus::Idle),
        ]);
        h.conn.query("SELECT 1").unwrap();
        h.drain();
        h
    });
    insta::assert_snapshot!(trace, @r#"
    -> Query "SELECT 1/0 FROM t"
       columns ?column?:23
       row 1
       query error ERROR 22012: division by zero
       query done Idle
    -> Query "SELECT 1"
    "#);
}

#[test]
fn copy_out_rows_arrive_one_event_per_copy_data() {
    let trace = run_both(|bytewise| {
        let mut h = ready_harness(bytewise, false);
        h.conn.query("COPY t TO STDOUT").unwrap();
        h.drain();
        h.server(&[
            BackendMessage::CopyOutResponse(copy_response(2)),
            BackendMessage::CopyData(Bytes::from_static(b"1\tone\n")),
            BackendMessage::CopyData(Bytes::from_static(b"2\t\\N\n")),
            BackendMessage::CopyDone,
            complete("COPY 2"),
            ready(TransactionStatus::InTransaction),
        ]);
        h
    });
    insta::assert_snapshot!(trace, @r#"
    -> Query "COPY t TO STDOUT"
       copy out started columns=2
       copy data "1\tone\n"
       copy data "2\t\\N\n"
       copy out done
       complete COPY 2
       query done InTransaction
    "#);
}

#[test]
fn an_error_during_copy_out_ends_the_query_not_the_connection() {
    let mut h = ready_harness(true, false);
    h.conn.query("COPY t TO STDOUT").unwrap();
    h.server(&[
        BackendMessage::CopyOutResponse(copy_response(1)),
        BackendMessage::CopyData(Bytes::from_static(b"1\n")),
        error("ERROR", "57014", "canceling statement due to user request"),
        ready(TransactionStatus::Idle),
    ]);
    assert_eq!(h.conn.phase(), Phase::Ready);
    assert!(h.text().contains("query error ERROR 57014"));
}

#[test]
fn copy_in_is_refused_with_copy_fail() {
    let mut h = ready_harness(false, false);
    h.conn.query("COPY t FROM STDIN").unwrap();
    h.drain();
    h.server(&[BackendMessage::CopyInResponse(copy_response(1))]);
    h.server(&[
        error(
            "ERROR",
            "57014",
            "COPY from stdin failed: slotline does not send COPY FROM STDIN data",
        ),
        ready(TransactionStatus::Idle),
    ]);
    insta::assert_snapshot!(h.text(), @r#"
    -> Query "COPY t FROM STDIN"
    -> CopyFail "slotline does not send COPY FROM STDIN data"
       query error ERROR 57014: COPY from stdin failed: slotline does not send COPY FROM STDIN data
       query done Idle
    "#);
}

#[test]
fn a_second_query_while_one_runs_is_a_usage_error() {
    let mut h = ready_harness(false, false);
    h.conn.query("SELECT 1").unwrap();
    assert_eq!(
        h.conn.query("SELECT 2"),
        Err(UsageError::NotReady { phase: Phase::Busy })
    );
    assert_eq!(
        h.conn.send_status_update(StatusUpdate {
            write: crate::Lsn(1),
            flush: crate::Lsn(1),
            apply: crate::Lsn(1),
            client_time: crate::time::PgTime(0),
            reply_requested: false,
        }),
        Err(UsageError::NotStreaming { phase: Phase::Busy })
    );
    h.drain();
    assert_eq!(h.sent.len(), 1, "only the first query went out");
}

#[test]
fn a_query_with_a_nul_byte_is_refused_and_leaves_nothing_half_sent() {
    let mut h = ready_harness(false, false);
    assert!(matches!(
        h.conn.query("SELECT '\0'"),
        Err(UsageError::Encode(_))
    ));
    assert_eq!(h.conn.phase(), Phase::Ready);
    assert!(h.conn.poll_transmit().is_none());
}

#[test]
fn notices_parameter_changes_and_notifications_arrive_at_any_time() {
    let mut h = ready_harness(false, false);
    h.conn.query("SET TimeZone = 'Europe/Paris'").unwrap();
    h.drain();
    h.server(&[
        BackendMessage::NoticeResponse(Box::new(pg_error("NOTICE", "00000", "hi"))),
        param("TimeZone", "Europe/Paris"),
        complete("SET"),
        BackendMessage::NotificationResponse(crate::wire::Notification {
            process_id: 9,
            channel: "c".into(),
            payload: "p".into(),
        }),
        ready(TransactionStatus::Idle),
    ]);
    assert_eq!(h.conn.parameters().get("TimeZone").unwrap(), "Europe/Paris");
    insta::assert_snapshot!(h.text(), @r#"
    -> Query "SET TimeZone = 'Europe/Paris'"
       notice NOTICE 00000: hi
       param TimeZone=Europe/Paris
       complete SET
       notification c "p"
       query done Idle
    "#);
}

#[test]
fn protocol_violations_latch_and_nothing_follows() {
    let cases: Vec<Vec<BackendMessage>> = vec![
        // A DataRow without a RowDescription.
        vec![row(&[Some("1")])],
        // ReadyForQuery in the middle of rows.
        vec![columns(&[("a", 23)]), ready(TransactionStatus::Idle)],
        // CopyData outside COPY.
        vec![BackendMessage::CopyData(Bytes::from_static(b"x"))],
        // A message that only the extended protocol produces.
        vec![BackendMessage::ParseComplete],
    ];
    let mut lines = Vec::new();
    for messages in cases {
        let mut h = ready_harness(true, false);
        h.conn.query("SELECT 1").unwrap();
        h.drain();
        h.trace.clear();
        h.server(&messages);
        h.server(&[complete("SELECT 1"), ready(TransactionStatus::Idle)]);
        assert_eq!(h.conn.phase(), Phase::Failed);
        assert!(matches!(
            h.conn.query("SELECT 1"),
            Err(UsageError::Failed(_))
        ));
        lines.extend(h.trace);
    }
    insta::assert_snapshot!(lines.join("\n"), @r"
       FAILED protocol violation: the server sent DataRow during a query (awaiting a result)
       columns a:23
       FAILED protocol violation: the server sent ReadyForQuery during a query (receiving rows)
       FAILED protocol violation: the server sent CopyData during a query (awaiting a result)
       FAILED protocol violation: the server sent ParseComplete during a query (awaiting a result)
    ");
}

#[test]
fn messages_while_idle_and_broken_frames_are_fatal_with_offsets() {
    let mut h = ready_harness(false, false);
    h.server(&[complete("SELECT 1")]);
    assert_eq!(
        h.conn.error(),
        Some(&ConnError::Unexpected {
            message: "CommandComplete",
            during: "idle (no query running)"
        })
    );

    let mut h = ready_harness(false, false);
    h.conn.query("SELECT 1").unwrap();
    // After the startup reply, a ReadyForQuery with status 'X' follows.
    let consumed: usize = trust_startup()
        .iter()
        .map(|m| encode_backend(m).len())
        .sum();
    h.server_bytes(b"Z\0\0\0\x05X");
    assert_eq!(
        h.conn.error().unwrap().to_string(),
        format!(
            "malformed backend message at stream byte {consumed}: decode error at byte 5: \
             unknown ReadyForQuery transaction status (I, T or E) tag 'X' (0x58)"
        )
    );

    let mut h = ready_harness(false, false);
    h.server_bytes(&[b'D', 0xFF, 0xFF, 0xFF, 0xFF]);
    assert!(matches!(
        h.conn.error(),
        Some(ConnError::Decode { error, .. })
            if matches!(error.kind, crate::DecodeErrorKind::BadLength { declared: 0xFFFF_FFFF, .. })
    ));
}

#[test]
fn a_fatal_error_at_any_time_ends_the_connection() {
    let mut h = ready_harness(false, false);
    h.server(&[error(
        "FATAL",
        "57P01",
        "terminating connection due to administrator command",
    )]);
    assert_eq!(h.conn.phase(), Phase::Failed);
    assert_eq!(
        h.text(),
        "   FAILED server error: FATAL 57P01: terminating connection due to administrator command"
    );
    h.conn.handle_eof();
    assert!(
        h.conn.poll_event().is_none(),
        "the failure is reported once"
    );
}

#[test]
fn close_sends_terminate_and_an_eof_afterwards_is_expected() {
    let mut h = ready_harness(false, false);
    h.conn.close();
    h.conn.close();
    h.drain();
    h.conn.handle_eof();
    h.server(&[complete("late")]);
    h.drain();
    assert_eq!(h.text(), "-> Terminate");
    assert_eq!(h.conn.phase(), Phase::Closed);
}

#[test]
fn an_unexpected_eof_is_fatal_and_names_the_phase() {
    let mut h = ready_harness(false, false);
    h.conn.query("SELECT 1").unwrap();
    h.conn.handle_eof();
    assert_eq!(
        h.conn.error().unwrap().to_string(),
        "the server closed the connection during a query (awaiting a result)"
    );
    assert!(
        h.conn.poll_transmit().is_none(),
        "unsent bytes are dropped on failure"
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_server_bytes_never_panic_and_a_failure_is_the_last_event(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            streaming: bool,
        ) {
            let mut h = ready_harness(false, true);
            h.conn.query("START_REPLICATION SLOT s LOGICAL 0/0").unwrap();
            if streaming {
                h.server(&[BackendMessage::CopyBothResponse(copy_response(0))]);
            }
            h.trace.clear();
            h.conn.handle_bytes(&bytes);
            h.conn.handle_bytes(&encode_backend(&ready(TransactionStatus::Idle)));
            h.drain();
            if let Some(at) = h.trace.iter().position(|l| l.contains("FAILED")) {
                prop_assert_eq!(at, h.trace.len() - 1);
                prop_assert_eq!(h.conn.phase(), Phase::Failed);
            }
        }
    }
}
