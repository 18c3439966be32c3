//! Feldera restarts and checkpoints (`FELDERA_DURABILITY`, `FELDERA_RESTART`): what is
//! acknowledged when a checkpoint succeeds or fails, and what a session does when the
//! pipeline came back from a checkpoint or empty.
use super::*;
use crate::Lsn;

fn user_rows(ids: std::ops::Range<u32>) -> Vec<Vec<Option<String>>> {
    ids.map(|i| vec![Some(i.to_string()), Some(format!("n{i}")), None])
        .collect()
}

/// A streaming pipeline against a Feldera pipeline with fault tolerance `model` (`None`:
/// none), the users Relation sent.
fn streaming_with(model: Option<&str>, config: &[(&str, &str)]) -> Script {
    let mut pairs = vec![TABLES];
    pairs.extend_from_slice(config);
    let mut s = Script::new_tweaked(&pairs, pg(), SCHEMA, |s| {
        if let Some(model) = model {
            s.set_fault_tolerance(model);
        }
    });
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    s
}

/// Answers every waiting request that is not about a checkpoint as Feldera would.
fn settle_rows(s: &mut Script) {
    while s
        .waiting()
        .first()
        .is_some_and(|w| !w.contains("/checkpoint"))
    {
        s.step();
    }
}

/// One checkpoint: the request is answered, then its status (success) a poll later.
fn one_checkpoint(s: &mut Script) {
    s.advance(1);
    assert!(
        s.waiting()
            .first()
            .is_some_and(|w| w.ends_with("POST /checkpoint")),
        "a checkpoint request waits: {:?}",
        s.waiting()
    );
    s.step();
    s.advance(250);
    assert!(
        s.waiting()
            .first()
            .is_some_and(|w| w.contains("/checkpoint_status")),
        "its status is asked: {:?}",
        s.waiting()
    );
    s.step();
}

#[test]
fn with_checkpoints_the_flush_moves_only_to_what_the_previous_request_found_complete() {
    let mut s = streaming_with(
        Some("at_least_once"),
        &[
            ("BATCH_LINGER_MS", "0"),
            ("FELDERA_CHECKPOINT_INTERVAL_SECS", "5"),
        ],
    );
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    settle_rows(&mut s);
    assert_eq!(
        s.confirmed, START,
        "complete is not enough: nothing acknowledged yet"
    );
    // Checkpoint #1 is requested at once (something complete waits for one); tx 701
    // completes after that request.
    s.advance(1);
    s.step();
    insert_tx(&mut s, 701, 0x2200, &["2"]);
    settle_rows(&mut s);
    s.advance(250);
    s.step();
    assert_eq!(
        s.confirmed, START,
        "#1 may be a checkpoint Feldera was already writing: it vouches for nothing yet"
    );
    one_checkpoint(&mut s);
    assert_eq!(
        s.confirmed,
        Lsn(0x2100),
        "#2 holds what was complete at #1's request"
    );
    one_checkpoint(&mut s);
    assert_eq!(
        s.confirmed,
        Lsn(0x2200),
        "#3 holds what was complete at #2's request"
    );
    s.advance(10_000);
    assert_eq!(
        s.waiting_requests(),
        0,
        "nothing left to hold: no more checkpoints"
    );
    rule!(
        "With FELDERA_DURABILITY=auto and a pipeline with fault tolerance, a completed commit is acknowledged only once a checkpoint holds it. Feldera answers a request that arrives while it writes a checkpoint with that checkpoint's result, so a success vouches for what was complete at the previous request of the session: #1 (tx 700 complete) credits nothing, #2 moves the flush to tx 700 (0/2100), #3 to tx 701 (0/2200), which completed after #1 was requested. A success that credits nothing, or after which nothing new completed, is followed at once; then the stream is quiet and no checkpoint is asked for.",
        s.take_trace()
    );
}

#[test]
fn a_failed_checkpoint_acknowledges_nothing_and_the_next_one_is_requested_an_interval_later() {
    let mut s = streaming_with(
        Some("exactly_once"),
        &[
            ("BATCH_LINGER_MS", "0"),
            ("FELDERA_CHECKPOINT_INTERVAL_SECS", "5"),
        ],
    );
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    settle_rows(&mut s);
    s.advance(1);
    s.step();
    s.advance(250);
    s.answer(
        200,
        r#"{"success":null,"failure":{"sequence_number":1,"error":"disk full","failed_at":"2026-12-02T00:00:00Z"}}"#,
    );
    assert_eq!(s.confirmed, START);
    s.advance(4_000);
    assert_eq!(
        s.waiting_requests(),
        0,
        "nothing asked until the interval passed"
    );
    s.advance(1_000);
    s.step();
    s.advance(250);
    s.step();
    // #1's attempt ended before #2 was requested: #2 holds what #1's request found.
    assert_eq!(s.confirmed, Lsn(0x2100));
    let counts = s.pipeline().health().checkpoints;
    assert_eq!(
        (counts.requested, counts.succeeded, counts.failed),
        (2, 1, 1)
    );
    rule!(
        "A checkpoint that failed (checkpoint_status reports the failure of its sequence number) acknowledges nothing: it is logged with Feldera's reason, and the next checkpoint is requested FELDERA_CHECKPOINT_INTERVAL_SECS later. That one began after the failed attempt ended, so its success holds what was complete when the failed one was requested (tx 700).",
        s.take_trace()
    );
}

#[test]
fn a_restart_from_a_checkpoint_replays_from_the_slot_and_copies_nothing() {
    let mut s = streaming_with(
        Some("at_least_once"),
        &[
            ("BATCH_LINGER_MS", "0"),
            ("FELDERA_CHECKPOINT_INTERVAL_SECS", "60"),
        ],
    );
    s.show_feldera_watch();
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    settle_rows(&mut s);
    one_checkpoint(&mut s);
    one_checkpoint(&mut s);
    assert_eq!(s.confirmed, Lsn(0x2100));
    // tx 701 completes, but no checkpoint holds it when Feldera restarts.
    insert_tx(&mut s, 701, 0x2200, &["2"]);
    settle_rows(&mut s);
    s.restart_feldera_from_checkpoint();
    assert_eq!(s.feldera.keys("users").len(), 1, "tx 701's row is gone");
    // The stream is idle: the keeper's next question notices the new incarnation.
    s.advance(2_000);
    for _ in 0..5 {
        s.settle();
        s.advance(300);
    }
    assert!(s.pipeline().health().streaming, "a new session streams");
    assert_eq!(s.pipeline().health().sessions, 2);
    // PostgreSQL sends what follows the slot's position again.
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    insert_tx(&mut s, 701, 0x2200, &["2"]);
    for _ in 0..10 {
        s.settle();
        s.advance(300);
    }
    assert_eq!(s.exit(), None);
    assert_eq!(
        s.feldera.keys("users").len(),
        2,
        "tx 701 replayed from the slot"
    );
    assert_eq!(s.confirmed, Lsn(0x2200));
    rule!(
        "Feldera restarts from its last checkpoint (which holds tx 700, not tx 701): the keeper's question while the stream is idle sees the new incarnation within 2 s and ends the session; the next session streams from the slot, which never moved past what the checkpoint holds, so tx 701 is replayed and acknowledged once a checkpoint holds it. Nothing is copied.",
        s.take_trace()
    );
}

/// A copy of two users written `complete` to Feldera's first incarnation, then a new
/// process streaming from the slot.
fn seeded_then_streaming(config: &[(&str, &str)]) -> Script {
    let mut pg = pg();
    pg.slot_confirmed = None;
    pg.tables = vec![
        users(ReplicaIdentity::Default).with_rows(user_rows(1..3), 1),
        super::items(),
    ];
    let mut pairs = vec![TABLES, ("SNAPSHOT_MODE", "initial")];
    pairs.extend_from_slice(config);
    let mut first = Script::new(&pairs, pg.clone(), SCHEMA);
    for _ in 0..50 {
        if first.pipeline().health().streaming {
            break;
        }
        first.settle();
        first.advance(10);
    }
    let state = first.state_file.clone();
    assert!(
        String::from_utf8_lossy(state.as_deref().unwrap_or_default())
            .contains("\"feldera_incarnation\": \"incarnation-1\""),
        "the state file records the incarnation the copy was written to"
    );
    pg.slot_confirmed = Some(START);
    let mut s = Script::with_state(&pairs, pg, SCHEMA, state);
    s.feldera = first.feldera.clone();
    for _ in 0..50 {
        if s.pipeline().health().streaming {
            break;
        }
        s.settle();
        s.advance(10);
    }
    s.take_trace();
    s
}

#[test]
fn a_restart_without_fault_tolerance_copies_every_table_again_without_exiting() {
    let mut s = seeded_then_streaming(&[]);
    s.show_feldera_watch();
    assert_eq!(s.feldera.keys("users").len(), 2);
    s.restart_feldera();
    s.advance(2_000);
    for _ in 0..40 {
        if s.pipeline().health().streaming && s.feldera.keys("users").len() == 2 {
            break;
        }
        s.settle();
        s.advance(100);
    }
    assert_eq!(s.exit(), None);
    assert_eq!(s.feldera.keys("users").len(), 2, "seeded again");
    let state = String::from_utf8_lossy(s.state_file.as_deref().unwrap_or_default()).into_owned();
    assert!(state.contains("\"phase\": \"complete\""), "{state}");
    assert!(state.contains("incarnation-2"), "{state}");
    rule!(
        "A pipeline without fault tolerance restarts and comes back empty: the keeper sees the new incarnation within 2 s and ends the session; the next start compares it with the incarnation the state file's copy was written to and, under FELDERA_RESTART=resnapshot, copies every table again (state pending, the slot dropped and created with an exported snapshot, leftovers retracted, state complete for incarnation-2) without the process exiting.",
        s.take_trace()
    );
}

#[test]
fn fault_tolerance_switched_on_at_a_restart_that_came_back_empty_copies_again() {
    let mut s = seeded_then_streaming(&[]);
    assert_eq!(s.feldera.keys("users").len(), 2);
    // The operator turns fault tolerance on and restarts the pipeline: it has no
    // checkpoint to resume from, so its tables come back empty, while its configuration
    // now says that a restart keeps them.
    s.set_fault_tolerance("at_least_once");
    s.restart_feldera_from_checkpoint();
    assert_eq!(s.feldera.keys("users").len(), 0);
    s.advance(2_000);
    for _ in 0..60 {
        if s.pipeline().health().streaming && s.feldera.keys("users").len() == 2 {
            break;
        }
        s.settle();
        s.advance(100);
    }
    assert_eq!(s.exit(), None);
    assert_eq!(s.feldera.keys("users").len(), 2, "seeded again");
    let trace = s.take_trace();
    assert!(
        trace.contains("restarted with nothing to resume from"),
        "{trace}"
    );
    let state = String::from_utf8_lossy(s.state_file.as_deref().unwrap_or_default()).into_owned();
    assert!(
        state.contains("\"fault_tolerance\": \"at_least_once\""),
        "{state}"
    );
    rule!(
        "A copy written to a pipeline without fault tolerance; the pipeline is switched to at_least_once and restarted. Its configuration now says a restart keeps the tables, but the new process reports that it resumed from nothing (initial_start_time equals its start time): the start treats it as emptied and copies every table again, and the state file records the pipeline as now written under at_least_once.",
        trace
    );
}

#[test]
fn feldera_restart_exit_refuses_to_stream_into_an_emptied_pipeline() {
    let mut s = seeded_then_streaming(&[("FELDERA_RESTART", "exit")]);
    s.restart_feldera();
    s.advance(2_000);
    for _ in 0..20 {
        if s.exit().is_some() {
            break;
        }
        s.settle();
        s.advance(100);
    }
    let (code, reason) = s.exit().cloned().expect("exits");
    assert_eq!(code, 1);
    assert!(reason.contains("FELDERA_RESTART=resnapshot"), "{reason}");
    rule!(
        "With FELDERA_RESTART=exit, a pipeline that came back empty after a restart without fault tolerance makes the next start exit 1, naming the incarnations and how to copy again; nothing is streamed into the emptied tables and the slot does not move.",
        s.take_trace()
    );
}

/// The pipeline's answer with its fault tolerance and `schema` as the program's.
fn pipeline_answer(schema: &str) -> String {
    format!(
        r#"{{"name":"p","runtime_config":{{"fault_tolerance":{{"model":"at_least_once"}}}},"program_status":"Success","deployment_status":"Running","program_info":{{"schema":{schema}}}}}"#
    )
}

/// Lets the keeper notice a restart and the next session start (or the run exit).
fn after_restart(s: &mut Script) {
    s.advance(2_000);
    for _ in 0..10 {
        if s.exit().is_some() {
            break;
        }
        s.settle();
        s.advance(100);
    }
}

#[test]
fn a_restarted_pipeline_with_a_changed_program_has_its_routes_planned_again() {
    let mut s = streaming_with(Some("at_least_once"), &[("BATCH_LINGER_MS", "0")]);
    s.take_trace();
    // A compatible change: the users table lost the bio column.
    let without_bio = SCHEMA.replace(
        r#",
            {"name":"bio","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":true,"precision":-1}}"#,
        "",
    );
    assert_ne!(without_bio, SCHEMA);
    s.set_pipeline_answer(&pipeline_answer(&without_bio));
    s.restart_feldera_from_checkpoint();
    after_restart(&mut s);
    assert_eq!(s.exit(), None);
    assert_eq!(s.pipeline().health().sessions, 2);
    // An incompatible one: users.id is no longer a number.
    let id_boolean = without_bio.replacen(r#""type":"BIGINT""#, r#""type":"BOOLEAN""#, 1);
    s.set_pipeline_answer(&pipeline_answer(&id_boolean));
    s.restart_feldera_from_checkpoint();
    after_restart(&mut s);
    let Some((code, reason)) = s.exit().cloned() else {
        panic!("no exit:\n{}", s.take_trace());
    };
    assert_eq!(code, 1, "{reason}");
    assert!(reason.contains("id"), "{reason}");
    assert_eq!(s.confirmed, START);
    rule!(
        "Feldera restarts with a changed program: each new session plans the routes again against the schema it reads. A dropped column is a warning (that column is no longer sent) and streaming goes on; a key column whose type no longer fits exits 1 before anything is streamed, naming the column, and nothing is acknowledged.",
        s.take_trace()
    );
}

#[test]
fn with_checkpoints_a_copy_is_recorded_complete_only_once_a_checkpoint_holds_it() {
    let mut pg = pg();
    pg.slot_confirmed = None;
    pg.tables = vec![
        users(ReplicaIdentity::Default).with_rows(user_rows(1..4), 1),
        super::items(),
    ];
    let mut s = Script::new_tweaked(&[TABLES, ("SNAPSHOT_MODE", "initial")], pg, SCHEMA, |s| {
        s.set_fault_tolerance("at_least_once")
    });
    for _ in 0..200 {
        if s.pipeline().health().streaming {
            break;
        }
        s.settle();
        s.advance(10);
    }
    assert!(s.pipeline().health().streaming);
    let trace = s.take_trace();
    let checkpoint = trace.find("POST /checkpoint").expect("a checkpoint");
    let complete = trace.find("write state").unwrap_or(usize::MAX);
    assert!(trace.matches("write state").count() >= 2, "{trace}");
    assert!(
        checkpoint < trace.rfind("write state").unwrap_or(0) && complete < checkpoint,
        "pending is written before the copy, complete only after the checkpoint:\n{trace}"
    );
    rule!(
        "With checkpoints, a copy whose every batch is complete and whose counts agree is recorded complete only after a Feldera checkpoint requested then succeeded: a restart from an earlier checkpoint would otherwise lose the copy with nothing left to repair it.",
        trace
    );
}

#[test]
fn with_checkpoints_a_graceful_stop_waits_for_a_checkpoint_holding_what_it_drained() {
    let mut s = streaming_with(
        Some("at_least_once"),
        &[
            ("BATCH_LINGER_MS", "0"),
            ("FELDERA_CHECKPOINT_INTERVAL_SECS", "60"),
        ],
    );
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    settle_rows(&mut s);
    one_checkpoint(&mut s);
    one_checkpoint(&mut s);
    assert_eq!(s.confirmed, Lsn(0x2100));
    s.take_trace();
    insert_tx(&mut s, 701, 0x2200, &["2"]);
    settle_rows(&mut s);
    s.shutdown();
    for _ in 0..20 {
        if s.exit().is_some() {
            break;
        }
        s.settle();
        s.advance(100);
    }
    assert_eq!(s.exit().map(|e| e.0), Some(0));
    assert_eq!(s.confirmed, Lsn(0x2200));
    rule!(
        "A graceful stop with checkpoints: once drained, the stop asks for a checkpoint at once (not an interval later), and the final status update reports what it holds (tx 701).",
        s.take_trace()
    );
}

#[test]
fn with_checkpoints_a_stop_that_leaves_a_feldera_transaction_open_ends_without_waiting_for_a_checkpoint(
) {
    let mut s = streaming_with(
        Some("at_least_once"),
        &[
            ("BATCH_LINGER_MS", "0"),
            ("BATCH_MAX_ROWS", "2"),
            ("FELDERA_TRANSACTIONS", "large"),
            ("FELDERA_CHECKPOINT_INTERVAL_SECS", "60"),
        ],
    );
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    for _ in 0..20 {
        s.settle();
        s.advance(300);
    }
    let confirmed = s.confirmed;
    assert_eq!(
        confirmed,
        Lsn(0x2100),
        "a checkpoint holds tx 700: {}",
        s.take_trace()
    );
    // tx 701 is complete but no checkpoint holds it yet; tx 702 is read in part.
    insert_tx(&mut s, 701, 0x2200, &["2"]);
    s.settle();
    s.take_trace();
    s.wal(
        "Begin 702, insert users 3, 4, 5 (no commit yet)",
        &[
            begin(0x2300, 702),
            insert(0x2210, 16384, &[Some("3"), Some("n"), None]),
            insert(0x2218, 16384, &[Some("4"), Some("n"), None]),
            insert(0x2220, 16384, &[Some("5"), Some("n"), None]),
        ],
    );
    s.settle();
    s.shutdown();
    let mut waited_ms = 0;
    while s.exit().is_none() && waited_ms < 5_000 {
        s.settle();
        s.advance(100);
        waited_ms += 100;
    }
    let trace = s.take_trace();
    assert_eq!(s.exit().map(|e| e.0), Some(0), "{trace}");
    assert!(waited_ms < 1_000, "the stop took {waited_ms} ms:\n{trace}");
    assert_eq!(s.confirmed, Lsn(0x2100), "no checkpoint holds tx 701");
    rule!(
        "A graceful stop with checkpoints that leaves a Feldera transaction open (a source transaction read in part under FELDERA_TRANSACTIONS=large): Feldera delays every checkpoint until a commit the stop does not make, so the stop asks for none, says so, and exits at once with what the last checkpoint holds (tx 700); the next start replays tx 701 and 702.",
        trace
    );
}

#[test]
fn a_completion_timeout_shorter_than_the_status_poll_still_lets_a_checkpoint_succeed() {
    let mut s = streaming_with(
        Some("at_least_once"),
        &[
            ("BATCH_LINGER_MS", "0"),
            ("FELDERA_COMPLETION_TIMEOUT_MS", "100"),
        ],
    );
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    settle_rows(&mut s);
    one_checkpoint(&mut s);
    one_checkpoint(&mut s);
    assert_eq!(
        s.confirmed,
        Lsn(0x2100),
        "each checkpoint is asked about once before its timeout counts"
    );
    assert_eq!(s.pipeline().health().checkpoints.failed, 0);
}
