//! Sessions end without acknowledging; the next starts after a backoff; only durable
//! progress resets it; no progress for too long exits 69; fatal errors exit 1 at once.
use super::*;
use crate::Lsn;

#[test]
fn completion_timeout_starts_a_new_session_without_acknowledging() {
    let mut s = streaming(&[
        ("BATCH_LINGER_MS", "0"),
        ("FELDERA_COMPLETION_TIMEOUT_MS", "1000"),
    ]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.accept();
    for _ in 0..30 {
        if s.waiting_requests() > 0 {
            s.in_progress();
        }
        s.advance(50);
    }
    assert_eq!(s.confirmed, START);
    rule!(
        "A batch not complete within FELDERA_COMPLETION_TIMEOUT_MS ends the session without acknowledging; the next session starts after a backoff.",
        s.take_trace()
    );
}

#[test]
fn feldera_503_ends_the_session_and_reconnects_after_a_backoff() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.answer(
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    );
    s.advance(1000);
    assert_eq!(s.confirmed, START);
    rule!(
        "A 503 from ingress ends the session without acknowledging and reconnects after a backoff.",
        s.take_trace()
    );
}

/// The manager gave up on an ingress request of a paused pipeline (its 30 s proxy timeout):
/// Feldera still holds the body and applies it at the resume. The replay of that table
/// waits until `/stats` shows the pipeline running, and a settling second more, so it can
/// never be overtaken by the old body (docs/contract.md, "What an ended session or run
/// leaves behind").
#[test]
fn a_request_without_feldera_s_answer_holds_its_table_until_feldera_is_seen_running() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    s.show_feldera_watch();
    s.set_pipeline_state("Paused");
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.answer(
        503,
        r#"{"message":"Error interacting with pipeline 'p': timeout","error_code":"PipelineInteractionUnreachable","details":{}}"#,
    );
    s.advance(4000);
    // Session 2 reads the transaction again from the slot.
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.advance(1000);
    let paused = s.take_trace();
    assert_eq!(
        paused.matches("POST ingress").count(),
        1,
        "no replay while Feldera is paused:\n{paused}"
    );
    s.set_pipeline_state("Running");
    s.advance(2000);
    let resumed = s.take_trace();
    assert_eq!(
        resumed.matches("POST ingress").count(),
        1,
        "the replay once Feldera runs:\n{paused}\n---\n{resumed}"
    );
    rule!(
        "A request without Feldera's answer keeps its table until /stats shows the pipeline running, plus 1 s.",
        format!("{paused}--- Feldera resumes\n{resumed}")
    );
}

/// A process that died while Feldera was paused leaves the bodies of its requests in
/// Feldera's endpoints, applied at the resume after whatever the next process sends. So a
/// start that finds a table's endpoint not reading (here: the pipeline paused) quarantines
/// that table until `/stats` shows its endpoints running and their counters still for a
/// settle: the held body (3 records) read first, then the replay.
#[test]
fn a_start_holds_a_table_whose_endpoint_may_hold_an_earlier_process_s_body() {
    let mut pairs = vec![TABLES, ("BATCH_LINGER_MS", "0")];
    pairs.push(("NO_PROGRESS_TIMEOUT_SECS", "60"));
    let mut s = Script::new_tweaked(&pairs, pg(), SCHEMA, |s| {
        s.set_pipeline_state("Paused");
        s.set_ingress_endpoints(&[("users", 10, 0)]);
    });
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    s.show_feldera_watch();
    s.take_trace();
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.advance(3000);
    let paused = s.take_trace();
    assert!(
        !paused.contains("POST ingress"),
        "nothing to users while its endpoint does not read:\n{paused}"
    );
    // Feldera resumes and reads the held body: the counters move, then stay.
    s.set_pipeline_state("Running");
    s.set_ingress_endpoints(&[("users", 13, 3)]);
    s.advance(700);
    s.set_ingress_endpoints(&[("users", 13, 0)]);
    s.advance(600);
    let reading = s.take_trace();
    assert!(
        !reading.contains("POST ingress"),
        "not while the counters move:\n{reading}"
    );
    s.advance(2500);
    let resumed = s.take_trace();
    assert_eq!(
        resumed.matches("POST ingress").count(),
        1,
        "users once its endpoint read nothing for a settle:\n{resumed}"
    );
    rule!(
        "A start that finds a table's ingress endpoint not reading (pipeline paused, endpoint paused or full) holds that table until two /stats answers 1 s apart show its endpoints running with counters unchanged.",
        format!("{paused}--- Feldera resumes and reads the held body\n{reading}--- still\n{resumed}")
    );
}

#[test]
fn backoff_grows_without_progress_and_resets_only_on_durable_progress() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    let mut delays = Vec::new();
    for round in 0..4 {
        s.disconnect();
        let trace = s.take_trace();
        let delay = trace
            .lines()
            .find_map(|l| l.split("reconnecting in ").nth(1))
            .unwrap()
            .to_owned();
        delays.push(format!("failure {round}: {delay}"));
        s.advance(31_000);
        s.wal(
            "Relation users",
            &[relation(&users(ReplicaIdentity::Default))],
        );
    }
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.settle();
    s.disconnect();
    let trace = s.take_trace();
    let delay = trace
        .lines()
        .find_map(|l| l.split("reconnecting in ").nth(1))
        .unwrap()
        .to_owned();
    delays.push(format!("after progress: {delay}"));
    rule!(
        "Each failure without durable progress doubles the ceiling the delay is drawn from (100, 200, 400, 800 ms); durable progress resets it to 100 ms.",
        delays.join("\n")
    );
}

#[test]
fn no_durable_progress_for_too_long_exits_69() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0"), ("NO_PROGRESS_TIMEOUT_SECS", "5")]);
    let mut replayed_in = 1;
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    for _ in 0..100 {
        if s.waiting_requests() > 0 {
            s.answer(
                503,
                r#"{"message":"down","error_code":"PipelineUnavailable","details":{}}"#,
            );
        }
        s.advance(250);
        if s.exit().is_some() {
            break;
        }
        // Every new session replays the unacknowledged transaction from the slot.
        let status = s.pipeline().health();
        if status.streaming && status.sessions > replayed_in {
            replayed_in = status.sessions;
            s.wal(
                "Relation users",
                &[relation(&users(ReplicaIdentity::Default))],
            );
            insert_tx(&mut s, 700, 0x2100, &["1"]);
        }
    }
    assert_eq!(s.exit().map(|e| e.0), Some(69));
    assert_eq!(s.confirmed, START);
    let trace = s.take_trace();
    let shown: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("exit") || l.contains("ended"))
        .collect();
    rule!(
        "Sessions that keep failing without durable progress exit 69 once NO_PROGRESS_TIMEOUT_SECS has passed (only session ends and the exit shown).",
        shown.join("\n")
    );
}

#[test]
fn restarted_pipeline_410_starts_a_new_session_and_replays() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.accept();
    s.answer(
        410,
        r#"{"message":"pipeline restarted","error_code":"PipelineRestarted","details":{}}"#,
    );
    s.advance(1000);
    // The slot replays the transaction in the new session.
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.settle();
    assert_eq!(s.confirmed, Lsn(0x2100));
    rule!(
        "A 410 PipelineRestarted while waiting for completion ends the session; the slot replays the transaction into the new session, which acknowledges it.",
        s.take_trace()
    );
}

/// Three one-row transactions with `BATCH_LINGER_MS=0` (batch k is transaction k) and the
/// crash at `point` the 2nd time it is reached.
fn crash_trace(point: &str) -> (String, Lsn) {
    let mut s = streaming(&[
        ("BATCH_LINGER_MS", "0"),
        ("CRASH_AT", point),
        ("CRASH_AFTER_BATCHES", "2"),
    ]);
    for (i, end) in [0x2100u64, 0x2200, 0x2300].iter().enumerate() {
        insert_tx(&mut s, 700 + i as u32, *end, &[&(i + 1).to_string()]);
        s.settle();
        if s.exit().is_some() {
            break;
        }
    }
    assert_eq!(s.exit().map(|e| e.0), Some(70), "{point}");
    (s.take_trace(), s.confirmed)
}

#[test]
fn crash_before_send_exits_70_with_the_batch_cut_and_nothing_sent() {
    let (trace, confirmed) = crash_trace("before_send");
    assert_eq!(trace.matches("POST ingress").count(), 1, "{trace}");
    assert_eq!(confirmed, Lsn(0x2100));
    rule!(
        "CRASH_AT=before_send exits 70 when the 2nd batch is cut, before it is posted: only batch #1 reached Feldera and only its commit (0/2100) was acknowledged.",
        trace
    );
}

#[test]
fn crash_after_send_exits_70_with_the_batch_accepted_and_not_acknowledged() {
    let (trace, confirmed) = crash_trace("after_send");
    assert_eq!(trace.matches("POST ingress").count(), 2, "{trace}");
    assert_eq!(confirmed, Lsn(0x2100));
    rule!(
        "CRASH_AT=after_send exits 70 once ingress accepted the 2nd batch (token t2), before its completion is asked for: the slot stays at 0/2100.",
        trace
    );
}

#[test]
fn crash_after_complete_exits_70_before_the_status_update() {
    let (trace, confirmed) = crash_trace("after_complete");
    assert_eq!(trace.matches("POST ingress").count(), 2, "{trace}");
    assert_eq!(confirmed, Lsn(0x2100));
    rule!(
        "CRASH_AT=after_complete exits 70 when Feldera says the 2nd batch is complete, before the status update: the slot stays at 0/2100 and a restart replays transaction 701.",
        trace
    );
}

#[test]
fn crash_after_ack_exits_70_after_the_status_update_was_written() {
    let (trace, confirmed) = crash_trace("after_ack");
    assert_eq!(trace.matches("POST ingress").count(), 2, "{trace}");
    assert_eq!(confirmed, Lsn(0x2200));
    rule!(
        "CRASH_AT=after_ack exits 70 right after the status update carrying 0/2200 was written.",
        trace
    );
}

#[test]
fn a_slot_still_held_by_a_dead_connection_is_retried_not_fatal() {
    let mut pg = pg();
    pg.slot_busy_answers = 2;
    let mut s = Script::new(&[TABLES], pg, SCHEMA);
    s.advance(1000);
    assert_eq!(s.exit(), None);
    assert!(s.pipeline().health().streaming);
    rule!(
        "A slot still held by another process (active_pid 4242) is retried with backoff, not fatal; the third session finds it free and streams.",
        s.take_trace()
    );
}

#[test]
fn a_slot_created_again_below_the_old_flush_starts_a_new_acknowledgement_history() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    s.settle();
    assert_eq!(s.confirmed, Lsn(0x2100));
    s.take_trace();
    s.lose_slot();
    s.disconnect();
    s.advance(1_000);
    s.advance(25_000);
    assert_eq!(
        s.confirmed,
        Lsn(0x1000),
        "the new slot's status updates carry its own consistent point, never the old flush"
    );
    rule!(
        "The slot disappears (a restore, a failover, someone dropped it) after 0/2100 was acknowledged; the next session creates it again at 0/1000. Its acknowledgement history starts at the new slot's position: every status update reports 0/1000 until a commit of the new slot becomes durable, never the earlier session's 0/2100, which would let PostgreSQL skip changes never delivered.",
        s.take_trace()
    );
}

#[test]
fn a_new_session_writes_to_a_table_only_after_the_ended_sessions_request_to_it_ended() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    assert_eq!(
        s.waiting_requests(),
        1,
        "tx 700's ingress request is out, unanswered"
    );
    s.disconnect();
    s.advance(1_000);
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    insert_tx(&mut s, 700, 0x2100, &["1"]);
    assert_eq!(
        s.waiting_requests(),
        1,
        "the replay must not be posted while the old request may still deliver records"
    );
    s.accept();
    assert_eq!(s.waiting_requests(), 1, "now the replay goes out");
    s.settle();
    assert_eq!(s.confirmed, crate::Lsn(0x2100));
    rule!(
        "Session 1 ends while its ingress request for tx 700 is still out (Feldera may still be reading it and queueing its records). Session 2 replays tx 700 but holds the batch back until that request ended: only then is anything of session 2 posted to users, so nothing of the old request can land after the replay.",
        s.take_trace()
    );
}

#[test]
fn a_session_start_against_a_paused_pipeline_says_once_to_resume_it() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    s.set_deployment_status("Paused");
    for _ in 0..3 {
        s.disconnect();
        s.advance(31_000);
    }
    let trace = s.take_trace();
    let warned: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("not Running"))
        .collect();
    assert_eq!(warned.len(), 1, "once while the status lasts:\n{trace}");
    assert!(
        warned[0].contains("resume it (POST http://feldera:8080/v0/pipelines/p/resume"),
        "{}",
        warned[0]
    );
    assert!(
        !warned[0].contains("/p/start"),
        "/start does nothing for a paused pipeline: {}",
        warned[0]
    );
    assert_eq!(s.pipeline().health().sessions, 4);
}

/// A first start whose PostgreSQL never answers (a wrong host or port) exits 69 at once
/// naming `slotline check`, as `pg_recvlogical` gives up on its first connection: five
/// minutes of retries would only hide the mistake.
#[test]
fn a_postgresql_this_run_never_reached_exits_69_at_once_naming_check() {
    let s = Script::new_tweaked(&[TABLES], pg(), SCHEMA, |s| {
        s.pg_down = Some("connection refused (db:5432)".into());
    });
    let (code, reason) = s.exit().expect("the run exits").clone();
    assert_eq!(code, 69, "{reason}");
    assert!(reason.contains("slotline check"), "{reason}");
    let mut s = s;
    s.advance(1000);
    rule!(
        "A PostgreSQL this run never reached exits 69 at the first failed connection, naming `slotline check`.",
        s.take_trace()
    );
}

/// The same for a Feldera that never answered: no HTTP answer at all in this run.
#[test]
fn a_feldera_this_run_never_reached_exits_69_at_once_naming_check() {
    let mut s = Script::new_tweaked(&[TABLES], pg(), SCHEMA, |s| {
        s.feldera_down = Some("connection refused".into());
    });
    s.advance(1000);
    let (code, reason) = s.exit().expect("the run exits").clone();
    assert_eq!(code, 69, "{reason}");
    assert!(
        reason.contains("Feldera at http://feldera:8080"),
        "{reason}"
    );
    assert!(reason.contains("slotline check"), "{reason}");
    rule!(
        "A Feldera this run never reached exits 69 at the first request without an answer, naming `slotline check`.",
        s.take_trace()
    );
}

/// Once a server answered, the same failures are an outage: the run retries with backoff
/// until NO_PROGRESS_TIMEOUT_SECS, whichever server it is.
#[test]
fn a_server_reached_once_is_retried_when_it_stops_answering() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    s.pg_down = Some("connection refused (db:5432)".into());
    s.disconnect();
    s.advance(2000);
    assert_eq!(s.exit(), None, "a PostgreSQL reached once is retried");
    let pg_trace = s.take_trace();
    assert!(
        pg_trace.matches("connect").count() >= 2,
        "reconnects:\n{pg_trace}"
    );
    s.pg_down = None;
    s.feldera_down = Some("connection refused".into());
    s.advance(4000);
    assert_eq!(s.exit(), None, "a Feldera reached once is retried");
    rule!(
        "PostgreSQL and Feldera, once reached, are retried with backoff when they stop answering.",
        format!(
            "{pg_trace}--- PostgreSQL back, Feldera gone\n{}",
            s.take_trace()
        )
    );
}

/// Giving up before any session got as far as the slot says so, instead of blaming the
/// slot's pinned WAL (there may be no slot at all).
#[test]
fn no_progress_before_any_session_reached_the_slot_does_not_blame_its_wal() {
    let mut pg = pg();
    pg.slot_busy_answers = 1_000;
    let mut s = Script::new(&[TABLES, ("NO_PROGRESS_TIMEOUT_SECS", "2")], pg, SCHEMA);
    s.advance(10_000);
    let (code, reason) = s.exit().expect("the run gives up").clone();
    assert_eq!(code, 69, "{reason}");
    assert!(
        reason.contains("no session reached the slot") && !reason.contains("pinned WAL"),
        "{reason}"
    );
    assert!(
        reason.contains("in use by PostgreSQL backend pid 4242"),
        "the last failure: {reason}"
    );
}
