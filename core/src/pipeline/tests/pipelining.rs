//! Several batches in flight (`MAX_IN_FLIGHT_BATCHES`): how the window fills, how requests to
//! one table stay in order, how completions are asked for and counted, and what failures,
//! crashes and stops do with several batches out (see `docs/pipelining.md`).
use super::*;
use crate::Lsn;

/// Streaming with one batch per transaction (`BATCH_LINGER_MS=0`) and `window` batches in
/// flight.
fn window(window: &str, extra: &[(&str, &str)]) -> Script {
    let mut config = vec![("BATCH_LINGER_MS", "0"), ("MAX_IN_FLIGHT_BATCHES", window)];
    config.extend_from_slice(extra);
    streaming(&config)
}

/// The end of transaction `k` (1-based) of `one_row_txs`.
fn end(k: u64) -> u64 {
    0x2000 + 0x100 * k
}

/// Transactions `from..=to`, each inserting user `k` and ending at `end(k)`.
fn one_row_txs(s: &mut Script, from: u64, to: u64) {
    for k in from..=to {
        insert_tx(s, 700 + k as u32, end(k), &[&k.to_string()]);
    }
}

/// Brings the oldest waiting request whose line (`Script::waiting`) contains `what` to the
/// front, so the next answer goes to it.
fn next(s: &mut Script, what: &str) {
    let index = s
        .waiting()
        .iter()
        .position(|line| line.contains(what))
        .unwrap_or_else(|| panic!("no waiting request like {what:?}: {:?}", s.waiting()));
    s.bring_forward(index);
}

fn accept_post(s: &mut Script) {
    next(s, "/ingress/");
    s.accept();
}

/// Answers the completion question about `token` (e.g. `t3`).
fn poll(s: &mut Script, token: &str, complete: bool) {
    next(s, &format!("/completion_status {token}"));
    if complete {
        s.complete();
    } else {
        s.in_progress();
    }
}

/// Answers Feldera as it would (everything accepted and complete), letting time pass for
/// questions the pacer scheduled later, until nothing waits or the pipeline exited.
fn drive(s: &mut Script) {
    for _ in 0..1000 {
        if s.exit().is_some() {
            return;
        }
        if !s.step() {
            s.advance(5);
            if s.waiting_requests() == 0 {
                return;
            }
        }
    }
}

fn count(trace: &str, what: &str) -> usize {
    trace.lines().filter(|l| l.contains(what)).count()
}

#[test]
fn the_window_fills_then_reading_pauses_until_a_batch_is_durable() {
    let mut s = window("4", &[]);
    one_row_txs(&mut s, 1, 6);
    // Four batches cut at once; their requests to users go out one after the other.
    for _ in 0..4 {
        accept_post(&mut s);
    }
    assert_eq!(s.pipeline().health().batch_in_flight, Some(1));
    assert_eq!(s.pipeline().health().batches_in_flight, 4);
    poll(&mut s, "t1", false);
    s.advance(2);
    poll(&mut s, "t4", false);
    poll(&mut s, "t1", true);
    assert_eq!(s.confirmed, Lsn(end(1)));
    drive(&mut s);
    assert_eq!(s.confirmed, Lsn(end(6)));
    assert_eq!(s.pipeline().health().batches_in_flight, 0);
    let trace = s.take_trace();
    assert_eq!(count(&trace, "pause reading"), 1, "{trace}");
    assert!(
        trace.find("#5 cut").unwrap() > trace.find("#1 durable").unwrap(),
        "{trace}"
    );
    rule!(
        "MAX_IN_FLIGHT_BATCHES=4: four batches go out without waiting for completion, each request to users after the previous one's 200; with the window full and the next batch due, reading pauses. Completion is asked for the newest token first, then the oldest; the first batch durable makes room, the fifth goes out and reading resumes.",
        trace
    );
}

#[test]
fn one_answer_about_the_newest_token_completes_every_earlier_batch_of_its_table() {
    let mut s = window("4", &[]);
    one_row_txs(&mut s, 1, 3);
    for _ in 0..3 {
        accept_post(&mut s);
    }
    // The first question (about t1) went out at once; by its answer t3 is the newest.
    poll(&mut s, "t1", false);
    s.advance(2);
    poll(&mut s, "t3", true);
    assert_eq!(s.confirmed, Lsn(end(3)));
    assert_eq!(s.waiting_requests(), 0);
    let trace = s.take_trace();
    assert_eq!(count(&trace, "GET completion_status"), 2, "{trace}");
    rule!(
        "On one table Feldera completes tokens in order: one answer \"complete\" about the newest token makes every earlier batch of that table durable, and the flush position moves through all three commits.",
        trace
    );
}

#[test]
fn completions_out_of_order_across_tables_move_only_the_contiguous_prefix() {
    let mut s = window("4", &[]);
    s.wal("Relation items", &[relation(&items())]);
    s.wal(
        "tx 701: insert items a",
        &[
            begin(end(1) - 0x8, 701),
            insert(end(1) - 0xF0, 16390, &[Some("a"), Some("1")]),
            commit(end(1) - 0x8, end(1)),
        ],
    );
    insert_tx(&mut s, 702, end(2), &["2"]);
    // Different tables: both requests go out at once.
    assert_eq!(s.waiting_requests(), 2);
    accept_post(&mut s);
    accept_post(&mut s);
    poll(&mut s, "t2", true);
    assert_eq!(s.confirmed, START, "batch #2 durable, #1 not yet");
    poll(&mut s, "t1", true);
    assert_eq!(s.confirmed, Lsn(end(2)));
    rule!(
        "Batches on different tables complete in any order: #2 (users) durable before #1 (lineitems) moves nothing; once #1 is durable the flush position moves through both commits at once.",
        s.take_trace()
    );
}

#[test]
fn a_503_on_batch_3_of_4_ends_the_session_and_replays_from_the_durable_prefix() {
    let mut s = window("4", &[]);
    one_row_txs(&mut s, 1, 4);
    accept_post(&mut s);
    poll(&mut s, "t1", true);
    accept_post(&mut s);
    next(&mut s, "/ingress/");
    s.answer(
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    );
    assert_eq!(s.confirmed, Lsn(end(1)), "only #1 was durable");
    s.advance(1000);
    // The slot replays everything after the flush position: transactions 2 to 4.
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    one_row_txs(&mut s, 2, 4);
    drive(&mut s);
    assert_eq!(s.confirmed, Lsn(end(4)));
    rule!(
        "Four batches in flight, #1 durable, #2 accepted, #3's request answered 503 (#4 still waits for it: one request per table at a time): the session ends and nothing after #1 is acknowledged (the slot stays at 0/2100). The slot replays transactions 2, 3 and 4 into the next session, which resends and acknowledges them; the late answer about #2 from the ended session finds no owner.",
        s.take_trace()
    );
}

#[test]
fn a_410_with_four_in_flight_acknowledges_nothing_and_replays_all_four() {
    let mut s = window("4", &[]);
    one_row_txs(&mut s, 1, 4);
    for _ in 0..4 {
        accept_post(&mut s);
    }
    next(&mut s, "/completion_status");
    s.answer(
        410,
        r#"{"message":"pipeline restarted","error_code":"PipelineRestarted","details":{}}"#,
    );
    assert_eq!(s.confirmed, START);
    s.advance(1000);
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    one_row_txs(&mut s, 1, 4);
    drive(&mut s);
    assert_eq!(s.confirmed, Lsn(end(4)));
    rule!(
        "Four batches accepted, none complete, and Feldera answers 410 PipelineRestarted: what it accepted may be lost, so the session ends without acknowledging anything and the next session resends all four transactions from the slot.",
        s.take_trace()
    );
}

/// Four one-row transactions with four batches in flight, every request accepted before
/// any completion is answered, and the crash at `point` the 3rd time it is reached.
fn crash_with_four_in_flight(point: &str) -> (String, Lsn) {
    let mut s = window("4", &[("CRASH_AT", point), ("CRASH_AFTER_BATCHES", "3")]);
    one_row_txs(&mut s, 1, 4);
    while s.exit().is_none() && s.waiting().iter().any(|l| l.contains("/ingress/")) {
        accept_post(&mut s);
    }
    drive(&mut s);
    assert_eq!(s.exit().map(|e| e.0), Some(70), "{point}");
    let trace = s.take_trace();
    // The last lines up to the exit (what the script fed after it is not shown).
    let upto: Vec<&str> = trace.lines().collect();
    let exit = upto
        .iter()
        .rposition(|l| l.contains("exit 70"))
        .unwrap_or(0);
    let tail: Vec<&str> = upto[..=exit].iter().rev().take(4).copied().collect();
    let mut shown = format!("== CRASH_AT={point} CRASH_AFTER_BATCHES=3\n");
    for line in tail.into_iter().rev() {
        shown.push_str(line);
        shown.push('\n');
    }
    shown.push_str(&format!("slot confirmed: {}\n", s.confirmed));
    (shown, s.confirmed)
}

#[test]
fn a_crash_at_each_point_with_several_batches_in_flight_acknowledges_only_the_durable_prefix() {
    let mut shown = String::new();
    for (point, confirmed) in [
        ("before_send", START),
        ("after_send", START),
        ("after_complete", Lsn(end(2))),
        ("after_ack", Lsn(end(3))),
    ] {
        let (tail, at) = crash_with_four_in_flight(point);
        assert_eq!(at, confirmed, "{point}");
        shown.push_str(&tail);
    }
    rule!(
        "With four batches in flight a crash acknowledges no more than the contiguous durable prefix: before_send (3rd batch cut, two in flight) and after_send (3rd accepted) leave the slot where it was; after_complete (3rd durable, not reported) leaves it at the 2nd commit; after_ack (3rd acknowledged) at the 3rd. The restart replays the rest.",
        shown
    );
}

#[test]
fn a_graceful_stop_with_several_in_flight_waits_for_them_and_sends_what_is_buffered() {
    let mut s = window("4", &[]);
    one_row_txs(&mut s, 1, 5);
    for _ in 0..4 {
        accept_post(&mut s);
    }
    s.shutdown();
    // Reading stopped; the fifth transaction, buffered, goes out once there is room.
    drive(&mut s);
    assert_eq!(s.exit().map(|e| e.0), Some(0));
    assert_eq!(s.confirmed, Lsn(end(5)));
    rule!(
        "A graceful stop with four batches in flight and a fifth buffered: nothing more is read, the four are awaited, the fifth is sent when a slot frees, and once all five are durable the final position is reported and confirmed; exit 0.",
        s.take_trace()
    );
}

#[test]
fn the_completion_poll_learns_how_long_feldera_takes() {
    let mut s = window("1", &[]);
    let mut rounds = Vec::new();
    for k in 1..=6u64 {
        insert_tx(&mut s, 700 + k as u32, end(k), &[&k.to_string()]);
        accept_post(&mut s);
        let accepted = s.pipeline().queue.now.mono;
        // Feldera completes each batch 40 ms after accepting it.
        let mut asked = Vec::new();
        loop {
            if s.waiting().iter().any(|l| l.contains("/completion_status")) {
                let since = s.pipeline().queue.now.mono.since(accepted);
                asked.push((since / 1000).to_string());
                let done = since >= 40_000;
                poll(&mut s, &format!("t{k}"), done);
                if done {
                    break;
                }
            }
            s.advance(1);
        }
        rounds.push(asked);
        s.take_trace();
    }
    assert_eq!(rounds[0][0], "0", "{rounds:?}");
    assert_eq!(
        rounds[5][0], "0",
        "the first question is always at once: {rounds:?}"
    );
    assert!(
        rounds[0].len() > rounds[5].len() && rounds[5][1] != "2",
        "once learned, the second question waits: {rounds:?}"
    );
    let shown: Vec<String> = rounds
        .iter()
        .enumerate()
        .map(|(i, asked)| {
            format!(
                "batch #{}: questions at {} ms after the 200",
                i + 1,
                asked.join(", ")
            )
        })
        .collect();
    rule!(
        "The first completion question goes out as soon as the ingress answered; nothing learned, the next ones follow 2 ms apart, doubling; once Feldera took about 40 ms for each batch, the second question waits half the median latency and the next ones come a quarter of it apart.",
        shown.join("\n")
    );
}
