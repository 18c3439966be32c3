//! The harness's checks fail when they should: each test breaks one rule by hand.

use super::input::{Event, Setup};
use super::pg::START;
use super::Harness;
use crate::io::{Command, ConnId, Input};
use crate::Lsn;
use bytes::Bytes;

use Event::*;

const GOOD: Event = Answer { pick: 0, class: 0 };

fn after(events: &[Event]) -> Harness {
    after_with(&Setup::default(), events)
}

fn after_with(setup: &Setup, events: &[Event]) -> Harness {
    let mut harness = Harness::start(setup);
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
    assert_eq!(harness.pipeline.health().batch_in_flight, Some(1));
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
    let conn = harness.pg.session().expect("the session's connection");
    harness.on_status_update(conn, START);
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

/// Streaming, user 1 inserted (r1) and renamed (r2) in two transactions, both acknowledged.
fn renamed_and_acknowledged() -> Harness {
    after(&[
        GOOD,
        Deliver(0),
        Tx(vec![0]),
        Tx(vec![2]),
        Deliver(0),
        TickAtDeadline(0),
        GOOD,
        GOOD,
    ])
}

#[test]
fn an_acknowledged_rename_reaches_feldera_and_the_slot() {
    let harness = renamed_and_acknowledged();
    let last = harness.pg.wal.last().map(|tx| tx.end);
    assert_eq!(harness.pg.confirmed(), last);
    let row = harness.feldera.tables.get(&("users", "1".to_owned()));
    assert_eq!(row, Some(&serde_json::json!({"id": 1, "name": "r2"})));
}

#[test]
#[should_panic(expected = "so only")]
fn a_late_record_that_brings_back_an_older_value_is_caught() {
    let mut harness = renamed_and_acknowledged();
    harness
        .feldera
        .land(99, "users", r#"{"insert":{"id":1,"name":"r1"}}"#.to_owned());
    harness.check_tables();
}

#[test]
#[should_panic(expected = "a key PostgreSQL never had")]
fn a_row_postgresql_never_had_is_caught() {
    let mut harness = renamed_and_acknowledged();
    harness
        .feldera
        .land(99, "items", r#"{"insert":{"sku":"s9","qty":1}}"#.to_owned());
    harness.check_tables();
}

#[test]
#[should_panic(expected = "Feldera's tables differ from PostgreSQL's")]
fn a_run_that_ends_with_a_row_missing_is_caught() {
    let mut harness = renamed_and_acknowledged();
    harness
        .feldera
        .land(99, "users", r#"{"delete":{"id":1}}"#.to_owned());
    harness.compare_tables();
}

#[test]
#[should_panic(expected = "a keepalive's position")]
fn a_flush_at_a_keepalive_read_inside_a_transaction_is_caught() {
    // The keepalive arrives while a transaction's Begin was read and its Commit was not.
    let mut harness = after(&[GOOD, Deliver(0), Tx(vec![0]), Deliver(0)]);
    let at = Lsn(harness.pg.wal[0].end.0 + 8);
    harness.pg.told.insert(at);
    harness.pg.keepalives_read.push((at, true));
    harness.judge_keepalives();
    harness.check_flush(at, "a hand-made flush");
}

#[test]
fn a_lossy_restart_keeps_exactly_what_a_completion_vouched_for() {
    let mut harness = after(&[
        GOOD,
        Deliver(0),
        Tx(vec![0]),
        Deliver(0),
        TickAtDeadline(0),
        GOOD,
        GOOD,
        Tx(vec![0]),
        Deliver(0),
        TickAtDeadline(0),
        GOOD,
    ]);
    assert_eq!(harness.feldera.tables.len(), 2, "both users landed");
    harness.apply(&FelderaRestart(1));
    let kept: Vec<&(&str, String)> = harness.feldera.tables.keys().collect();
    assert_eq!(
        kept,
        [&("users", "1".to_owned())],
        "user 2 was never completed"
    );
}

/// Users 1 and 2 acknowledged in two commits; the server is restored to the end of the
/// first and the next session creates the slot there, below the flush it reported.
fn restored_and_streaming_again() -> (Harness, Lsn) {
    let mut harness = after(&[
        GOOD,
        Deliver(0),
        Tx(vec![0]),
        Deliver(0),
        TickAtDeadline(0),
        GOOD,
        GOOD,
        Tx(vec![0]),
        Deliver(0),
        TickAtDeadline(0),
        GOOD,
        GOOD,
        TickAtDeadline(0),
    ]);
    let old_flush = harness.run.reported_flush;
    assert_eq!(Some(old_flush), harness.pg.wal.last().map(|tx| tx.end));
    for event in [SlotGone(1), TickAtDeadline(0), GOOD, Deliver(0)] {
        harness.apply(&event);
        harness.settle();
    }
    assert!(
        harness.pg.life_start < old_flush,
        "{:?}",
        harness.pg.life_start
    );
    assert!(harness.pipeline.health().streaming);
    (harness, old_flush)
}

#[test]
fn a_restore_takes_back_the_changes_after_it() {
    let (harness, _) = restored_and_streaming_again();
    assert_eq!(harness.pg.slots_created, 1);
    assert_eq!(harness.pg.workload.tables().len(), 1, "only user 1 is left");
    // Feldera still holds user 2: outside the promise, not a difference.
    assert!(harness
        .pg
        .workload
        .is_lost(&("users", "2".to_owned()), None));
}

#[test]
#[should_panic(expected = "the position of an earlier slot?")]
fn a_new_slot_reporting_the_earlier_slots_flush_is_caught() {
    let (mut harness, old_flush) = restored_and_streaming_again();
    let conn = harness.pg.session().expect("the session's connection");
    harness.on_status_update(conn, old_flush);
}

#[test]
#[should_panic(expected = "Feldera has not made durable")]
fn a_flush_past_a_truncate_whose_deletes_are_not_durable_is_caught() {
    // User 1 acknowledged, then a TRUNCATE of users read but not retracted yet.
    let mut harness = after(&[
        GOOD,
        Deliver(0),
        Tx(vec![0]),
        Deliver(0),
        TickAtDeadline(0),
        GOOD,
        GOOD,
        Tx(vec![7]),
        Deliver(0),
    ]);
    assert_eq!(
        harness.pg.wal[1].markers,
        [("users", r#"{"delete":{"id":1}}"#.to_owned())]
    );
    let end = harness.pg.wal[1].end;
    harness.check_flush(end, "a hand-made flush");
}

#[test]
fn a_key_scan_and_a_count_answer_from_the_committed_tables() {
    let mut harness = renamed_and_acknowledged();
    harness
        .feldera
        .land(99, "users", r#"{"insert":{"id":7,"name":"x"}}"#.to_owned());
    let scan = harness
        .feldera
        .query(r#"SELECT "users"."id" AS "k0" FROM "users""#, false);
    assert_eq!(
        scan, "{\"k0\":7}\n{\"k0\":1}\n",
        "every key, in no promised order"
    );
    let count = harness
        .feldera
        .query(r#"SELECT COUNT(*) AS "slotline_count" FROM "users""#, false);
    assert_eq!(count, "{\"slotline_count\":2}\n");
    // User 7 landed outside any request Feldera completed: a lagging query misses it.
    let lagging = harness
        .feldera
        .query(r#"SELECT COUNT(*) AS "slotline_count" FROM "users""#, true);
    assert_eq!(lagging, "{\"slotline_count\":1}\n");
}

fn with_fault_tolerance(events: &[Event]) -> Harness {
    let setup = Setup {
        fault_tolerance: true,
        ..Setup::default()
    };
    let mut harness = Harness::start(&setup);
    harness.settle();
    for event in events {
        harness.apply(event);
        harness.settle();
    }
    harness
}

/// With fault tolerance: a two-row transaction ingested, and Feldera starting a checkpoint
/// of its own before either row completed.
fn checkpoint_before_completion() -> Vec<Event> {
    vec![
        GOOD,
        Deliver(0),
        Tx(vec![0, 1]),
        Deliver(0),
        TickAtDeadline(0),
        GOOD,
        GOOD,
        FelderaRestart(2),
    ]
}

#[test]
#[should_panic(expected = "Feldera has not made durable")]
fn with_checkpoints_a_flush_past_a_commit_only_completed_is_caught() {
    let mut harness = with_fault_tolerance(&[
        GOOD,
        Deliver(0),
        Tx(vec![0, 1]),
        Deliver(0),
        TickAtDeadline(0),
        GOOD,
        GOOD,
        TickAtDeadline(0),
        GOOD,
        GOOD,
    ]);
    assert_eq!(harness.feldera.durable_batches, 2, "both rows completed");
    assert_eq!(harness.pipeline.health().flush, START, "no checkpoint yet");
    let end = harness.pg.wal[0].end;
    harness.check_flush(end, "a hand-made flush");
}

#[test]
fn a_request_joining_a_checkpoint_gets_its_state_from_before_the_request() {
    let mut harness = with_fault_tolerance(
        &[
            &checkpoint_before_completion()[..],
            // Both rows complete; the pipeline requests a checkpoint, which joins Feldera's.
            &[TickAtDeadline(0), GOOD, GOOD, TickAtDeadline(0), GOOD],
            // Its status: success.
            &[TickAtDeadline(0), GOOD],
        ]
        .concat(),
    );
    assert_eq!(harness.feldera.checkpoint_counts(), (1, 1));
    assert_eq!(
        harness.pipeline.health().flush,
        START,
        "the first credits nothing"
    );
    assert!(
        !harness.feldera.holds("r1"),
        "the checkpoint began before user 1 completed"
    );
    harness.apply(&FelderaRestart(1));
    assert!(
        harness.feldera.tables.is_empty(),
        "{:?}",
        harness.feldera.tables
    );
    assert_eq!(
        harness.feldera.resumed, 0,
        "resumed from an empty checkpoint"
    );
}

#[test]
fn a_restart_resumes_from_the_last_successful_checkpoint() {
    let mut harness = with_fault_tolerance(
        &[
            &checkpoint_before_completion()[..],
            &[TickAtDeadline(0), GOOD, GOOD, TickAtDeadline(0), GOOD],
            &[TickAtDeadline(0), GOOD],
            // The next request starts a checkpoint with both rows; it fails, and the one
            // after it succeeds.
            &[TickAtDeadline(0), GOOD, TickAtDeadline(0)],
            &[Answer {
                pick: 0,
                class: 0xa2,
            }],
        ]
        .concat(),
    );
    assert_eq!(
        harness.feldera.checkpoint_counts(),
        (1, 1),
        "the second failed"
    );
    assert_eq!(harness.pipeline.health().flush, START);
    // A checkpoint of Feldera's own, with both rows, then a restart before it ends.
    harness.apply(&FelderaRestart(2));
    harness.apply(&FelderaRestart(1));
    assert!(
        harness.feldera.tables.is_empty(),
        "{:?}",
        harness.feldera.tables
    );
    assert_eq!(harness.feldera.restarts, 1);
}

/// A snapshot run whose copy has begun: Feldera was counted empty, the slot exported its
/// snapshot, the worker's COPY rows wait for deliveries.
fn copying() -> Harness {
    let setup = Setup {
        snapshot: true,
        create_slot: true,
        rows: 2,
        ..Setup::default()
    };
    let mut harness = Harness::start(&setup);
    harness.settle();
    for event in [GOOD, GOOD, GOOD] {
        harness.apply(&event);
        harness.settle();
    }
    harness
}

#[test]
fn a_snapshot_run_reaches_the_copy() {
    let harness = copying();
    assert_eq!(harness.pg.exports.len(), 1);
    assert!(!harness.promised(), "the copy is under way");
}

#[test]
#[should_panic(
    expected = "the state file says complete (consistent point 0/100000), but Feldera's tables are not the snapshot"
)]
fn a_complete_state_file_before_the_copy_is_durable_is_caught() {
    use crate::snapshot::state::SnapshotPhase;
    let mut harness = copying();
    let file = super::snapshot::state_file(SnapshotPhase::Complete, "incarnation-0");
    let _ = harness.write_state(&Bytes::from(file.encode()));
}

#[test]
#[should_panic(expected = "SNAPSHOT_MODE=initial created a slot without exporting a snapshot")]
fn a_slot_created_without_a_snapshot_in_initial_mode_is_caught() {
    let mut pg = super::pg::FakePg::new(false, false, false, "60s");
    pg.with_snapshot(2, 1, 0);
    let conn = ConnId(1);
    assert!(pg.open(conn));
    let mut startup = 196_608u32.to_be_bytes().to_vec();
    startup.extend_from_slice(b"user\0slotline\0replication\0database\0\0");
    let mut message = (startup.len() as u32 + 4).to_be_bytes().to_vec();
    message.extend(startup);
    pg.write(conn, &message);
    let sql = "CREATE_REPLICATION_SLOT \"slotline_p\" LOGICAL pgoutput (SNAPSHOT 'nothing')";
    let mut query = vec![b'Q'];
    query.extend_from_slice(&(sql.len() as u32 + 5).to_be_bytes());
    query.extend_from_slice(sql.as_bytes());
    query.push(0);
    pg.write(conn, &query);
}

/// A stream-only run whose publication is choice `choice` (`Setup::publication`), after
/// `events`.
fn published_after(choice: u8, events: &[Event]) -> Harness {
    let setup = Setup {
        crash_after: choice,
        ..Setup::default()
    };
    let mut harness = Harness::start(&setup);
    harness.settle();
    for event in events {
        harness.apply(event);
        harness.settle();
    }
    harness
}

/// Users filtered by id, items published by key alone: users 1, 2 and 3 (3 outside the
/// filter) and skus s0 and s1 inserted in one commit, acknowledged.
fn filtered_and_listed() -> Harness {
    let mut harness = published_after(1, &[GOOD, Deliver(0), Tx(vec![0, 0, 0, 1, 0x11])]);
    acknowledge(&mut harness);
    harness
}

/// Delivers what waits and answers Feldera well until the requests are done.
fn acknowledge(harness: &mut Harness) {
    for _ in 0..4 {
        for event in [Deliver(0), TickAtDeadline(0), GOOD, GOOD, GOOD, GOOD] {
            harness.apply(&event);
            harness.settle();
        }
    }
}

fn users(harness: &Harness) -> Vec<(String, serde_json::Value)> {
    harness
        .feldera
        .tables
        .iter()
        .filter(|((table, _), _)| *table == "users")
        .map(|((_, key), row)| (key.clone(), row.clone()))
        .collect()
}

#[test]
fn the_setup_chooses_the_publication_only_without_a_crash_point() {
    use super::publication::Publication;
    assert_eq!(Setup::default().publication(), Publication::default());
    let chosen = Setup {
        crash_after: 3,
        ..Setup::default()
    };
    assert!(chosen.publication().users.filter && chosen.publication().items.list);
    let crashing = Setup {
        crash: 1,
        crash_after: 3,
        ..Setup::default()
    };
    assert_eq!(crashing.publication(), Publication::default());
}

#[test]
fn the_catalog_and_the_relation_messages_say_what_the_publication_publishes() {
    use super::pg::{ITEMS, USERS};
    use super::publication::{Publication, USERS_FILTER};
    let publication = Publication::choice(1);
    let text = |s: &str| Some(s.to_owned());
    assert_eq!(
        publication.catalog_rows(),
        [
            vec![
                text("public"),
                text("items"),
                None,
                None,
                text("[\"sku\"]"),
                None
            ],
            vec![
                text("public"),
                text("users"),
                None,
                None,
                None,
                text(USERS_FILTER)
            ],
        ]
    );
    let names = |oid: u32| -> Vec<String> {
        publication
            .relation(oid)
            .columns
            .into_iter()
            .map(|c| c.name)
            .collect()
    };
    assert_eq!(names(USERS), ["id", "name"]);
    assert_eq!(names(ITEMS), ["sku"]);
}

#[test]
fn the_stream_publishes_only_the_rows_inside_the_filter_and_the_listed_columns() {
    let harness = filtered_and_listed();
    assert_eq!(
        harness.pg.wal[0].markers,
        [
            ("users", "\"r1\"".to_owned()),
            ("users", "\"r2\"".to_owned()),
            ("items", r#"{"insert":{"sku":"s0"}}"#.to_owned()),
            ("items", r#"{"insert":{"sku":"s1"}}"#.to_owned()),
        ],
        "user 3 is outside the filter"
    );
    assert_eq!(harness.pg.confirmed(), Some(harness.pg.wal[0].end));
    assert_eq!(
        users(&harness),
        [
            ("1".to_owned(), serde_json::json!({"id": 1, "name": "r1"})),
            ("2".to_owned(), serde_json::json!({"id": 2, "name": "r2"})),
        ]
    );
    let items: Vec<&serde_json::Value> = harness
        .feldera
        .tables
        .iter()
        .filter(|((table, _), _)| *table == "items")
        .map(|(_, row)| row)
        .collect();
    assert_eq!(
        items,
        [
            &serde_json::json!({"sku": "s0"}),
            &serde_json::json!({"sku": "s1"})
        ],
        "no quantity reaches Feldera"
    );
}

#[test]
fn an_update_across_the_filter_is_published_as_an_insert_or_a_delete() {
    let mut harness = filtered_and_listed();
    // User 3 (outside) gets id 4 (inside), user 1 id 5 (both inside), user 2 id 6
    // (outside); then user 6 is renamed (outside: nothing).
    harness.apply(&Tx(vec![0x23, 0x03, 0x13, 0x12]));
    acknowledge(&mut harness);
    assert_eq!(
        harness.pg.wal[1].markers,
        [
            ("users", "\"r6\"".to_owned()),
            ("users", "\"r7\"".to_owned()),
            ("users", r#"{"delete":{"id":2}}"#.to_owned()),
        ]
    );
    assert_eq!(harness.pg.confirmed(), Some(harness.pg.wal[1].end));
    assert_eq!(
        users(&harness),
        [
            ("4".to_owned(), serde_json::json!({"id": 4, "name": "r6"})),
            ("5".to_owned(), serde_json::json!({"id": 5, "name": "r7"})),
        ]
    );
}

#[test]
#[should_panic(expected = "so only")]
fn feldera_holding_a_row_outside_the_filter_is_caught() {
    let mut harness = filtered_and_listed();
    harness
        .feldera
        .land(99, "users", r#"{"insert":{"id":3,"name":"r3"}}"#.to_owned());
    harness.check_tables();
}

#[test]
#[should_panic(expected = "as the publication publishes them")]
fn a_left_out_column_in_feldera_at_the_end_is_caught() {
    let mut harness = filtered_and_listed();
    harness
        .feldera
        .land(99, "items", r#"{"insert":{"sku":"s0","qty":4}}"#.to_owned());
    harness.compare_tables();
}

#[test]
#[should_panic(expected = "which the publication's column list leaves out")]
fn a_left_out_value_sent_to_feldera_is_caught() {
    let mut harness = filtered_and_listed();
    let qty = super::publication::LEFT_OUT_QTY + 4;
    let request = crate::feldera::HttpRequest {
        method: crate::feldera::Method::Post,
        url: format!("{}/v0/pipelines/p/ingress/items", super::feldera::BASE_URL),
        headers: Vec::new(),
        body: Bytes::from(format!("{{\"insert\":{{\"sku\":\"s0\",\"qty\":{qty}}}}}\n")),
        timeout_ms: 1000,
        streamed: false,
    };
    harness.execute(Command::Http {
        id: crate::io::HttpId(900),
        request,
    });
}

#[test]
#[should_panic(expected = "which the publication's column list leaves out")]
fn a_left_out_name_in_a_query_is_caught() {
    let publication = super::publication::Publication::choice(2);
    publication.assert_nothing_left_out(
        "a query's URL",
        "http://feldera:8080/v0/pipelines/p/query?sql=SELECT%20%27left-out-3%27",
    );
}

/// A snapshot of users 1 to 4 (name `left-out-<n>`) and skus s0 to s2, as exported.
fn exported(publication: &super::publication::Publication) -> super::export::Export {
    let mut workload = super::workload::Workload::default();
    workload.publication = *publication;
    workload.seed(4, 3, START);
    super::export::Export {
        name: "00000003-00000001-1".to_owned(),
        holder: ConnId(1),
        valid: true,
        point: START,
        rows: workload.tables(),
        temporary: false,
    }
}

/// What the fake answers `sql` inside the snapshot, CopyData and DataRow texts.
fn answered(publication: &super::publication::Publication, sql: &str) -> Vec<String> {
    use crate::wire::backend::BackendMessage;
    let exports = [exported(publication)];
    let reply = super::export::answer(
        sql,
        Some(super::export::WorkerTx::Snapshot(0)),
        &exports,
        0,
        |_| 5,
        publication,
    );
    reply
        .messages
        .into_iter()
        .filter_map(|message| match message {
            BackendMessage::CopyData(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
            BackendMessage::DataRow(row) => Some(
                row.columns
                    .iter()
                    .map(|c| {
                        c.as_ref()
                            .map_or("NULL".into(), |b| String::from_utf8_lossy(b))
                    })
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            _ => None,
        })
        .collect()
}

const USERS_COPY: &str =
    r#"COPY (SELECT "id" FROM "public"."users" WHERE (((id % 3) <> 0))) TO STDOUT"#;

#[test]
fn the_copy_reads_only_the_rows_inside_the_filter_and_the_listed_columns() {
    let publication = super::publication::Publication::choice(3);
    assert_eq!(answered(&publication, USERS_COPY), ["1\n", "2\n", "4\n"]);
    let items = r#"COPY (SELECT "sku" FROM "public"."items" WHERE ((sku <> 's1'::text)) AND ctid >= '(0,0)'::tid) TO STDOUT"#;
    assert_eq!(answered(&publication, items), ["s0\n", "s2\n"]);
    let everything = super::publication::Publication::default();
    let all = r#"COPY (SELECT "sku", "qty" FROM "public"."items") TO STDOUT"#;
    assert_eq!(
        answered(&everything, all),
        ["s0\t5\n", "s1\t6\n", "s2\t7\n"]
    );
}

#[test]
#[should_panic(expected = "does not apply exactly the publication's row filter")]
fn a_copy_without_the_row_filter_is_caught() {
    let publication = super::publication::Publication::choice(3);
    answered(
        &publication,
        r#"COPY (SELECT "id" FROM "public"."users" WHERE ctid >= '(0,0)'::tid) TO STDOUT"#,
    );
}

#[test]
#[should_panic(expected = "does not apply exactly the publication's row filter")]
fn a_copy_with_a_filter_the_publication_does_not_have_is_caught() {
    let publication = super::publication::Publication::choice(2);
    answered(&publication, USERS_COPY);
}

#[test]
#[should_panic(expected = "does not select exactly the published columns")]
fn a_copy_of_a_left_out_column_is_caught() {
    let publication = super::publication::Publication::choice(3);
    answered(
        &publication,
        r#"COPY (SELECT "id", "name" FROM "public"."users" WHERE (((id % 3) <> 0))) TO STDOUT"#,
    );
}

#[test]
fn a_leftover_question_is_answered_from_the_rows_inside_the_filter() {
    let publication = super::publication::Publication::choice(1);
    let sql = r#"SELECT t."id" FROM "public"."users" AS t WHERE (t."id") IN (VALUES ('1'::pg_catalog.int8), ('3'::pg_catalog.int8), ('9'::pg_catalog.int8)) AND (((id % 3) <> 0))"#;
    assert_eq!(
        answered(&publication, sql),
        ["1"],
        "3 exists outside the filter"
    );
}

#[test]
#[should_panic(expected = "does not apply the publication's row filter")]
fn a_leftover_question_without_the_row_filter_is_caught() {
    let publication = super::publication::Publication::choice(1);
    answered(
        &publication,
        r#"SELECT t."id" FROM "public"."users" AS t WHERE (t."id") IN (VALUES ('3'::pg_catalog.int8))"#,
    );
}

/// The run of `hand-restart-paused-body` to its end, with Feldera's `/stats` hiding the
/// pause when `hide_pause`.
fn restart_paused_body(hide_pause: bool) -> Harness {
    let (setup, events) = super::seeds::restart_paused_body();
    let mut harness = Harness::start(&setup);
    harness.feldera.hide_pause = hide_pause;
    harness.settle();
    for event in &events {
        harness.apply(event);
        harness.settle();
    }
    harness.catch_up();
    harness
}

#[test]
fn a_body_held_while_paused_outlives_its_process_and_the_new_one_waits_for_it() {
    let harness = restart_paused_body(false);
    assert_eq!(harness.run.process_restarts, 1);
    assert_eq!(
        harness.feldera.orphans_landed, 1,
        "the dead process's rename landed at the resume"
    );
    assert!(harness.run.converged, "{:?}", harness.run);
    let row = harness.feldera.tables.get(&("users", "1".to_owned()));
    assert_eq!(row, Some(&serde_json::json!({"id": 1, "name": "r3"})));
    // The new process's ids begin above the old one's.
    assert!(
        harness.http_base > 1 && harness.conn_base > 1,
        "bases {} and {}",
        harness.http_base,
        harness.conn_base
    );
}

#[test]
#[should_panic(expected = "so only")]
fn a_start_that_cannot_see_the_held_body_lets_it_land_after_an_acknowledged_value_and_is_caught() {
    restart_paused_body(true);
}

/// Streaming, user 1's insert posted and unanswered, the process killed.
fn killed_with_a_body_out() -> Harness {
    after(&[
        GOOD,
        Deliver(0),
        Tx(vec![0]),
        Deliver(0),
        TickAtDeadline(0),
        ProcessRestart(0),
    ])
}

#[test]
fn stats_show_a_dead_process_s_body_buffered_while_running_and_unread_while_paused() {
    let mut harness = killed_with_a_body_out();
    let running = harness.feldera.stats_now();
    assert!(running.contains(r#""state":"Running""#), "{running}");
    assert!(
        running.contains(r#""total_records":0,"total_bytes":0,"buffered_records":1,"#),
        "read at once: its record is queued, not yet in the table: {running}"
    );
    harness.apply(&FelderaPause(0));
    let paused = harness.feldera.stats_now();
    assert!(paused.contains(r#""state":"Paused""#), "{paused}");
    assert!(
        paused.contains(r#""users.api-ingress-0000000000000000""#)
            && paused.contains(r#""buffered_records":0,"buffered_bytes":0"#),
        "the endpoint exists and reads nothing: {paused}"
    );
    harness.apply(&FelderaPause(0));
    assert_eq!(harness.feldera.orphans_landed, 1, "read at the resume");
    let resumed = harness.feldera.stats_now();
    assert!(
        resumed.contains(r#""total_records":1,"#) && resumed.contains(r#""buffered_records":0,"#),
        "{resumed}"
    );
    assert!(harness
        .feldera
        .tables
        .contains_key(&("users", "1".to_owned())));
}

#[test]
fn a_dead_process_s_body_lands_before_a_later_request_to_its_table_while_running() {
    let mut harness = killed_with_a_body_out();
    assert!(harness.feldera.tables.is_empty());
    // The new process streams the insert again and a rename after it; its request lands
    // whole with its 200, and the dead one's record (queued first) before it.
    let latest = Answer {
        pick: 0xff,
        class: 0,
    };
    for event in [
        latest.clone(),
        Deliver(0),
        Tx(vec![2]),
        Deliver(0),
        TickAtDeadline(0),
    ] {
        harness.apply(&event);
        harness.settle();
    }
    for _ in 0..8 {
        harness.apply(&latest);
        harness.settle();
        harness.apply(&TickAtDeadline(0));
        harness.settle();
    }
    assert_eq!(harness.feldera.orphans_landed, 1);
    let row = harness.feldera.tables.get(&("users", "1".to_owned()));
    assert_eq!(row, Some(&serde_json::json!({"id": 1, "name": "r2"})));
}

#[test]
#[should_panic(expected = "an input for a dead process")]
fn an_input_for_a_dead_process_is_never_fed_to_the_new_one() {
    let mut harness = killed_with_a_body_out();
    harness.feed(Input::PgConnected { conn: ConnId(1) });
}
