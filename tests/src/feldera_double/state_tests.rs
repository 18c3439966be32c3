//! Unit tests of `state`: arrival order, completion, transactions, restart, limits.

use super::*;
use crate::feldera_double::value::Value;

fn pipeline(delay: CompletionDelay) -> Pipeline {
    let schema = Schema::parse(json!({"inputs": [{"name": "t", "fields": [
        {"name": "id", "columntype": {"type": "BIGINT", "nullable": false}}],
        "primary_key": ["id"]}], "outputs": []}))
    .expect("schema");
    Pipeline::new(Arc::new(schema), delay, Duration::from_secs(1))
}

fn insert(id: i64) -> Vec<Change> {
    vec![Change::Insert(vec![Value::Int(id)])]
}

/// A whole request arriving at once: its records, then its token.
fn accept(p: &mut Pipeline, endpoint: u64, changes: Vec<Change>, now: Instant) -> String {
    let upload = p.begin_upload(0, endpoint);
    let records = changes.len() as u64;
    p.queue(&upload, changes, records, now)
        .expect("same incarnation");
    p.token(&upload).expect("same incarnation")
}

fn upsert(id: i64, name: &str) -> Vec<Change> {
    vec![Change::Insert(vec![
        Value::Int(id),
        Value::Str(name.into()),
    ])]
}

fn named_pipeline() -> Pipeline {
    let schema = Schema::parse(json!({"inputs": [{"name": "t", "fields": [
        {"name": "id", "columntype": {"type": "BIGINT", "nullable": false}},
        {"name": "name", "columntype": {"type": "VARCHAR", "nullable": true}}],
        "primary_key": ["id"]}], "outputs": []}))
    .expect("schema");
    Pipeline::new(
        Arc::new(schema),
        CompletionDelay::Fixed(Duration::ZERO),
        Duration::from_secs(1),
    )
}

#[test]
fn records_of_concurrent_uploads_apply_in_arrival_order_not_request_order() {
    let mut p = named_pipeline();
    let now = Instant::now();
    let e = p.endpoint_for("t").unwrap();
    let (slow, fast) = (p.begin_upload(0, e), p.begin_upload(0, e));
    p.queue(&slow, upsert(1, "slow first"), 1, now).unwrap();
    p.queue(&fast, upsert(1, "fast"), 1, now).unwrap();
    let fast_token = p.token(&fast).unwrap();
    p.queue(&slow, upsert(1, "slow last"), 1, now).unwrap();
    let slow_token = p.token(&slow).unwrap();
    let rows = p.tables[0].visible_rows();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0][1], Value::Str("slow last".into()));
    let count = |t: &str| CompletionToken::decode(t).unwrap().c;
    assert_eq!(
        (count(&fast_token), count(&slow_token)),
        (2, 3),
        "a token covers what its endpoint queued up to the end of its body"
    );
    assert_eq!(
        status(&mut p, &fast_token, now),
        Completion::Complete { step: 2 },
        "each arrival is its own step"
    );
}

#[test]
fn a_token_is_complete_only_once_the_last_record_it_covers_is_processed() {
    let mut p = named_pipeline();
    let t0 = Instant::now();
    let e = p.endpoint_for("t").unwrap();
    let upload = p.begin_upload(0, e);
    p.queue(&upload, upsert(1, "a"), 1, t0).unwrap();
    p.completion_delay = CompletionDelay::Never;
    p.queue(&upload, upsert(2, "b"), 1, t0).unwrap();
    assert_eq!(
        (rows(&p), p.queued_records()),
        (1, 1),
        "the first piece was processed mid-body"
    );
    let token = p.token(&upload).unwrap();
    assert_eq!(
        status(&mut p, &token, t0),
        Completion::InProgress { step: None }
    );
    p.release_completions(t0);
    assert_eq!(status(&mut p, &token, t0), Completion::Complete { step: 2 });
}

#[test]
fn an_upload_begun_before_a_restart_queues_nothing_after_it() {
    let mut p = named_pipeline();
    let now = Instant::now();
    let e = p.endpoint_for("t").unwrap();
    let upload = p.begin_upload(0, e);
    p.queue(&upload, upsert(1, "before"), 1, now).unwrap();
    p.restart(true, now);
    assert_eq!(p.queue(&upload, upsert(2, "after"), 1, now), Err(Restarted));
    assert_eq!(p.token(&upload), Err(Restarted));
    assert_eq!((rows(&p), p.queued_records()), (1, 0));
}

fn rows(p: &Pipeline) -> usize {
    p.tables[0].visible_rows().len()
}

fn status(p: &mut Pipeline, token: &str, now: Instant) -> Completion {
    let t = CompletionToken::decode(token).expect("own token decodes");
    p.completion(&t, now).expect("current incarnation")
}

#[test]
fn requests_are_processed_in_order_once_due_and_not_while_paused() {
    let mut p = pipeline(CompletionDelay::Fixed(Duration::from_millis(10)));
    let t0 = Instant::now();
    let e = p.endpoint_for("t?format=json").unwrap();
    let a = accept(&mut p, e, insert(1), t0);
    assert_eq!(
        status(&mut p, &a, t0),
        Completion::InProgress { step: None }
    );
    p.paused = true;
    assert_eq!(
        status(&mut p, &a, t0 + Duration::from_millis(20)),
        Completion::InProgress { step: None }
    );
    p.paused = false;
    assert_eq!(
        status(&mut p, &a, t0 + Duration::from_millis(20)),
        Completion::Complete { step: 1 }
    );
    assert_eq!(rows(&p), 1);
}

#[test]
fn a_transaction_holds_its_requests_until_commit() {
    let mut p = pipeline(CompletionDelay::Fixed(Duration::ZERO));
    let now = Instant::now();
    let e = p.endpoint_for("t").unwrap();
    assert_eq!(p.start_transaction(now), Ok(1));
    assert_eq!(p.start_transaction(now), Err(1));
    let a = accept(&mut p, e, insert(1), now);
    let b = accept(&mut p, e, insert(2), now);
    assert_eq!(
        (rows(&p), status(&mut p, &b, now)),
        (0, Completion::InProgress { step: Some(1) }),
        "in the circuit, not complete"
    );
    assert_eq!(p.commit_transaction(now), Some(1));
    assert_eq!(rows(&p), 2);
    assert_eq!(
        status(&mut p, &a, now),
        status(&mut p, &b, now),
        "one step for the whole transaction"
    );
    assert_eq!(p.commit_transaction(now), None);
}

#[test]
fn the_commit_is_asynchronous_and_a_start_takes_in_what_waits() {
    let delay = Duration::from_millis(10);
    let mut p = pipeline(CompletionDelay::Fixed(delay));
    let t0 = Instant::now();
    let e = p.endpoint_for("t").unwrap();
    let before = accept(&mut p, e, insert(1), t0);
    assert_eq!(p.start_transaction(t0), Ok(1));
    let inside = accept(&mut p, e, insert(2), t0);
    let later = t0 + 2 * delay;
    assert_eq!(
        status(&mut p, &before, later),
        Completion::InProgress { step: Some(1) },
        "taken into the transaction: not processed before its commit"
    );
    assert_eq!(p.commit_transaction(later), Some(1));
    assert_eq!(rows(&p), 0, "the commit only started");
    assert_eq!(p.start_transaction(later), Ok(2), "a new one may start");
    let done = later + delay;
    assert_eq!(
        status(&mut p, &inside, done),
        Completion::Complete { step: 1 }
    );
    assert_eq!(
        status(&mut p, &before, done),
        Completion::Complete { step: 1 }
    );
    assert_eq!(rows(&p), 2);
}

#[test]
fn held_commits_wait_for_a_release_while_other_requests_are_processed() {
    let mut p = pipeline(CompletionDelay::Fixed(Duration::ZERO));
    let now = Instant::now();
    let e = p.endpoint_for("t").unwrap();
    p.hold_commits = true;
    assert_eq!(p.start_transaction(now), Ok(1));
    let a = accept(&mut p, e, insert(1), now);
    assert_eq!(p.commit_transaction(now), Some(1));
    assert_eq!(rows(&p), 0, "the commit waits");
    assert_eq!(
        status(&mut p, &a, now),
        Completion::InProgress { step: Some(1) }
    );
    p.release_completions(now);
    p.advance(now);
    assert_eq!(
        (rows(&p), status(&mut p, &a, now)),
        (1, Completion::Complete { step: 1 })
    );
}

#[test]
fn restart_loses_the_queue_and_invalidates_tokens() {
    let mut p = pipeline(CompletionDelay::Never);
    let now = Instant::now();
    let e = p.endpoint_for("t").unwrap();
    let a = accept(&mut p, e, insert(1), now);
    p.restart(true, now);
    let t = CompletionToken::decode(&a).unwrap();
    assert_eq!(p.completion(&t, now), Err(TokenError::Restarted));
    p.release_completions(now);
    p.advance(now);
    assert_eq!(rows(&p), 0);
}

#[test]
fn more_than_the_endpoint_limit_is_refused() {
    let mut p = pipeline(CompletionDelay::Never);
    for i in 0..MAX_INGRESS_ENDPOINTS {
        assert!(p.endpoint_for(&format!("t?n={i}")).is_some());
    }
    assert_eq!(
        p.endpoint_for("t?n=0"),
        Some(0),
        "a known spelling keeps its id"
    );
    assert_eq!(p.endpoint_for("t?n=new"), None);
}

#[test]
fn an_applied_change_is_stamped_with_its_due_time_never_before_the_group_ahead() {
    let mut p = pipeline(CompletionDelay::Fixed(Duration::from_millis(20)));
    p.apply_times = Some(ApplyTimes::new(1));
    let t0 = Instant::now();
    let e = p.endpoint_for("t").unwrap();
    accept(&mut p, e, insert(1), t0);
    p.completion_delay = CompletionDelay::Fixed(Duration::ZERO);
    accept(&mut p, e, insert(2), t0 + Duration::from_millis(5));
    assert_eq!(rows(&p), 0, "the second group waits behind the first");
    // Processed late (nobody looked until +50 ms), stamped when it was due.
    p.advance(t0 + Duration::from_millis(50));
    let rel = &p.schema.inputs[0];
    let stamps = p.apply_times.as_ref().unwrap().of_table(0, rel);
    let due = t0 + Duration::from_millis(20);
    assert_eq!(stamps, vec![(json!([1]), due), (json!([2]), due)]);
}

#[test]
fn without_apply_times_nothing_is_stamped() {
    let mut p = pipeline(CompletionDelay::Fixed(Duration::ZERO));
    let e = p.endpoint_for("t").unwrap();
    accept(&mut p, e, insert(1), Instant::now());
    assert_eq!((rows(&p), p.apply_times.is_none()), (1, true));
}

#[test]
fn a_full_queue_holds_its_readers_and_lets_the_newest_go_first_once_there_is_room() {
    let mut p = pipeline(CompletionDelay::Never);
    p.queue_records = 3;
    let now = Instant::now();
    let e = p.endpoint_for("t").unwrap();
    let other = p.endpoint_for("t-other").unwrap();
    accept(
        &mut p,
        e,
        [1, 2, 3].into_iter().flat_map(insert).collect(),
        now,
    );
    assert_eq!(p.buffered(e), 3);
    let (older, newer) = (p.begin_upload(0, e), p.begin_upload(0, e));
    let (mut older_ticket, mut newer_ticket) = (None, None);
    assert_eq!(p.admit(&older, &mut older_ticket, now), Ok(false), "full");
    assert_eq!(p.admit(&newer, &mut newer_ticket, now), Ok(false), "full");
    // Another endpoint's queue is its own.
    let mut ticket = None;
    assert_eq!(
        p.admit(&p.begin_upload(0, other), &mut ticket, now),
        Ok(true)
    );

    p.release_completions(now);
    assert_eq!(
        p.admit(&older, &mut older_ticket, now),
        Ok(false),
        "the newer waits too"
    );
    assert_eq!(p.admit(&newer, &mut newer_ticket, now), Ok(true));
    p.queue(&newer, insert(4), 1, now).unwrap();
    assert_eq!(p.admit(&older, &mut older_ticket, now), Ok(true));
    assert_eq!((older_ticket, newer_ticket), (None, None));

    // A restart ends every wait.
    accept(&mut p, e, insert(5), now);
    let mut ticket = None;
    let stale = p.begin_upload(0, e);
    p.queue_records = 1;
    assert_eq!(p.admit(&stale, &mut ticket, now), Ok(false));
    p.restart(true, now);
    assert_eq!(p.admit(&stale, &mut ticket, now), Err(Restarted));
}

#[test]
fn records_a_transaction_holds_are_in_the_circuit_not_buffered() {
    let mut p = pipeline(CompletionDelay::Never);
    let now = Instant::now();
    let e = p.endpoint_for("t").unwrap();
    accept(&mut p, e, insert(1), now);
    p.start_transaction(now).expect("none open");
    accept(&mut p, e, insert(2), now);
    assert_eq!(p.buffered(e), 0, "taken in by the transaction");
    assert_eq!(p.inputs_json()[0]["metrics"]["buffered_records"], 0);
    assert_eq!(p.inputs_json()[0]["metrics"]["total_records"], 2);
}
