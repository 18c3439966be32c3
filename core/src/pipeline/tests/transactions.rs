//! `FELDERA_TRANSACTIONS`: source transactions wrapped in Feldera transactions, and what
//! happens on a crash, a 410, a 503 and a stop inside one (see `docs/pipelining.md`).
use super::*;
use crate::Lsn;

const STALE: &str = r#"{"message":"Cannot perform this operation while there is a transaction in progress","error_code":"TransactionInProgress","details":null}"#;
const COMMIT_STARTED: &str = r#""Transaction commit initiated""#;

fn large(extra: &[(&str, &str)]) -> Script {
    let mut config = vec![
        ("FELDERA_TRANSACTIONS", "large"),
        ("BATCH_MAX_ROWS", "2"),
        ("BATCH_LINGER_MS", "0"),
    ];
    config.extend_from_slice(extra);
    streaming(&config)
}

/// Feldera with transactions: every request answered well; a token of a batch sent inside
/// an open transaction is in the circuit but not complete until the commit (which here
/// finishes at once).
#[derive(Default)]
struct Feldera {
    open: bool,
    started: u64,
}

impl Feldera {
    /// Answers the oldest waiting request; false when none waits.
    fn step(&mut self, s: &mut Script) -> bool {
        let Some(front) = s.waiting().first().cloned() else {
            return false;
        };
        if front.contains("/start_transaction") {
            self.started += 1;
            self.open = true;
            s.answer(200, &format!("{{\"transaction_id\":{}}}", self.started));
        } else if front.contains("/commit_transaction") {
            self.open = false;
            s.answer(200, COMMIT_STARTED);
        } else if front.contains("/completion_status") && self.open {
            s.in_circuit();
        } else {
            s.step();
        }
        true
    }

    /// Answers until nothing waits (letting time pass for questions asked later).
    fn drive(&mut self, s: &mut Script) {
        for _ in 0..1000 {
            if s.exit().is_some() {
                return;
            }
            if !self.step(s) {
                s.advance(5);
                if s.waiting_requests() == 0 {
                    return;
                }
            }
        }
    }
}

fn rows(s: &Script) -> usize {
    s.feldera.keys("users").len()
}

#[test]
fn a_source_transaction_spanning_batches_becomes_one_feldera_transaction() {
    let mut s = large(&[]);
    let mut feldera = Feldera::default();
    insert_tx(&mut s, 701, 0x2100, &["1"]);
    feldera.drive(&mut s);
    insert_tx(&mut s, 702, 0x2200, &["2"]);
    feldera.drive(&mut s);
    assert_eq!((rows(&s), s.confirmed), (2, Lsn(0x2200)));
    let before = s.take_trace();
    insert_tx(&mut s, 703, 0x2300, &["3", "4", "5", "6", "7"]);
    let mut seen = Vec::new();
    while feldera.step(&mut s) {
        seen.push(rows(&s));
    }
    assert!(
        seen.iter().all(|r| *r == 2 || *r == 7),
        "never part of it: {seen:?}"
    );
    assert_eq!((rows(&s), s.confirmed), (7, Lsn(0x2300)));
    let trace = s.take_trace();
    assert_eq!(trace.matches("POST /start_transaction").count(), 1);
    rule!(
        "FELDERA_TRANSACTIONS=large: the session's first batch goes into a Feldera transaction (one an earlier run left open would be adopted); then a one-batch transaction goes out plainly; a transaction of five rows in batches of two waits until nothing else is in flight, starts a Feldera transaction, sends its three batches into it, asks until each table's records are in the circuit, commits, and waits until the newest token is complete: all three batches are durable at once, and Feldera's table goes from 2 rows to 7 with nothing in between.",
        format!("{before}== the large transaction\n{trace}")
    );
}

#[test]
fn all_wraps_every_batch_one_transaction_at_a_time() {
    let mut s = streaming(&[("FELDERA_TRANSACTIONS", "all"), ("BATCH_LINGER_MS", "0")]);
    let mut feldera = Feldera::default();
    insert_tx(&mut s, 701, 0x2100, &["1"]);
    insert_tx(&mut s, 702, 0x2200, &["2"]);
    feldera.drive(&mut s);
    assert_eq!(s.confirmed, Lsn(0x2200));
    let trace = s.take_trace();
    assert_eq!(trace.matches("POST /start_transaction").count(), 2);
    let second_start = trace.rfind("POST /start_transaction").unwrap();
    let first_durable = trace.find("its Feldera transaction is committed").unwrap();
    assert!(first_durable < second_start, "{trace}");
    rule!(
        "FELDERA_TRANSACTIONS=all: every batch is its own Feldera transaction; the second waits (cut, not sent) until the first is committed and complete.",
        trace
    );
}

#[test]
fn the_commit_waits_until_every_table_s_records_are_in_the_circuit() {
    let mut s = large(&[]);
    insert_tx(&mut s, 701, 0x2100, &["1"]);
    s.answer(200, r#"{"transaction_id":1}"#);
    s.accept();
    // Still in the table's input queue: no step yet.
    s.in_progress();
    s.advance(2);
    s.in_circuit();
    assert!(s.waiting()[0].contains("/commit_transaction"));
    s.answer(200, COMMIT_STARTED);
    s.in_circuit();
    s.advance(2);
    s.complete();
    assert_eq!(s.confirmed, Lsn(0x2100));
    rule!(
        "Before committing, the newest token of each table is asked about until Feldera gives it a step (its records left the input queue for the circuit: a commit only takes what the circuit holds); after the commit started, until it is complete. Only then is the transaction acknowledged.",
        s.take_trace()
    );
}

#[test]
fn a_transaction_left_open_is_adopted_and_committed_at_the_end_of_the_replay() {
    let mut s = large(&[]);
    let mut feldera = Feldera::default();
    insert_tx(&mut s, 701, 0x2100, &["1", "2", "3"]);
    s.answer(409, STALE);
    feldera.open = true;
    feldera.drive(&mut s);
    assert_eq!(s.confirmed, Lsn(0x2100));
    rule!(
        "start_transaction answered 409 TransactionInProgress (a transaction an earlier run left open, or someone else's): slotline warns, sends its batches into it and commits it when the source transaction ends.",
        s.take_trace()
    );
}

#[test]
fn a_crash_inside_a_feldera_transaction_leaves_it_open_and_the_next_run_adopts_it() {
    let mut s = large(&[("CRASH_AT", "after_send"), ("CRASH_AFTER_BATCHES", "2")]);
    let mut feldera = Feldera::default();
    insert_tx(&mut s, 701, 0x2100, &["1", "2", "3", "4", "5"]);
    feldera.drive(&mut s);
    assert_eq!(s.exit().map(|e| e.0), Some(70));
    assert_eq!((s.confirmed, rows(&s)), (START, 0));
    let first = s.take_trace();
    // The next run: the slot replays the transaction, Feldera still holds the open one.
    let mut s = large(&[]);
    insert_tx(&mut s, 701, 0x2100, &["1", "2", "3", "4", "5"]);
    s.answer(409, STALE);
    let mut feldera = Feldera {
        open: true,
        started: 1,
    };
    feldera.drive(&mut s);
    assert_eq!((s.confirmed, rows(&s)), (Lsn(0x2100), 5));
    rule!(
        "CRASH_AT=after_send inside a Feldera transaction (two batches accepted): nothing is acknowledged and the transaction stays open in Feldera, views see none of it. The next run's first batch finds it open (409), adopts it, and sends the replayed transaction into it; the commit makes the whole transaction visible at once (on keyed tables the rows sent twice converge).",
        format!("== run 1\n{first}== run 2\n{}", s.take_trace())
    );
}

#[test]
fn a_410_inside_a_feldera_transaction_ends_the_session_and_the_replay_starts_afresh() {
    let mut s = large(&[]);
    let mut feldera = Feldera::default();
    insert_tx(&mut s, 701, 0x2100, &["1", "2", "3"]);
    while !s
        .waiting()
        .first()
        .is_some_and(|l| l.contains("/completion_status"))
        || feldera.open
    {
        assert!(feldera.step(&mut s));
    }
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
    insert_tx(&mut s, 701, 0x2100, &["1", "2", "3"]);
    feldera.drive(&mut s);
    assert_eq!(s.confirmed, Lsn(0x2100));
    rule!(
        "A 410 PipelineRestarted while the commit's tokens are awaited: the restarted Feldera has no transaction any more (what it held is lost, or, with fault tolerance, replayed and committed by Feldera), so the session ends unacknowledged; the replay starts a fresh transaction and is acknowledged once it is committed.",
        s.take_trace()
    );
}

#[test]
fn a_503_inside_a_feldera_transaction_ends_the_session_and_the_replay_adopts_it() {
    let mut s = large(&[]);
    let mut feldera = Feldera::default();
    insert_tx(&mut s, 701, 0x2100, &["1", "2", "3", "4", "5"]);
    s.answer(200, r#"{"transaction_id":1}"#);
    s.accept();
    s.answer(
        503,
        r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":{}}"#,
    );
    assert_eq!(s.confirmed, START);
    s.advance(1000);
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    insert_tx(&mut s, 701, 0x2100, &["1", "2", "3", "4", "5"]);
    s.answer(409, STALE);
    feldera.open = true;
    feldera.drive(&mut s);
    assert_eq!((s.confirmed, rows(&s)), (Lsn(0x2100), 5));
    rule!(
        "A 503 for the second batch of a Feldera transaction ends the session unacknowledged; Feldera still holds the transaction with the first batch in it. The replay finds it open (409), adopts it, sends the whole source transaction again and commits it: it becomes visible at once and is acknowledged.",
        s.take_trace()
    );
}

#[test]
fn a_commit_answered_no_transaction_lets_the_tokens_decide() {
    let mut s = large(&[]);
    insert_tx(&mut s, 701, 0x2100, &["1"]);
    s.answer(200, r#"{"transaction_id":1}"#);
    s.accept();
    s.in_circuit();
    s.answer(
        400,
        r#"{"message":"This operation requires an active transaction, but none is currently in progress","error_code":"NoTransactionInProgress","details":null}"#,
    );
    s.complete();
    assert_eq!(s.confirmed, Lsn(0x2100));
    rule!(
        "commit_transaction answered 400 NoTransactionInProgress (someone else committed it, or Feldera restarted): slotline warns and asks the tokens; complete means the rows were committed, and the transaction is acknowledged (a restart would answer 410 instead).",
        s.take_trace()
    );
}

#[test]
fn a_stop_inside_a_source_transaction_leaves_the_feldera_transaction_open() {
    let mut s = large(&[]);
    s.wal(
        "Begin 701, insert users 1, 2, 3 (no commit yet)",
        &[
            begin(0x2100, 701),
            insert(0x2010, 16384, &[Some("1"), Some("n"), None]),
            insert(0x2018, 16384, &[Some("2"), Some("n"), None]),
            insert(0x2020, 16384, &[Some("3"), Some("n"), None]),
        ],
    );
    s.answer(200, r#"{"transaction_id":1}"#);
    s.shutdown();
    s.accept();
    assert_eq!(s.exit().map(|e| e.0), Some(0));
    assert_eq!((s.confirmed, rows(&s)), (START, 0));
    rule!(
        "A graceful stop inside a source transaction: the batch already in the Feldera transaction is accepted, the row still buffered is not sent, nothing is committed or acknowledged, and the Feldera transaction is left open with a warning saying how to give it up; the next start adopts it and replays the source transaction into it.",
        s.take_trace()
    );
}

#[test]
fn a_truncate_inside_a_large_transaction_commits_what_came_before_it_first() {
    let mut s = large(&[]);
    let mut feldera = Feldera::default();
    s.wal(
        "tx 701: insert users 1, 2, 3; TRUNCATE users; insert users 9",
        &[
            begin(0x2100, 701),
            insert(0x2010, 16384, &[Some("1"), Some("n"), None]),
            insert(0x2018, 16384, &[Some("2"), Some("n"), None]),
            insert(0x2020, 16384, &[Some("3"), Some("n"), None]),
            truncate(0x2028, &[16384]),
            insert(0x2030, 16384, &[Some("9"), Some("n"), None]),
            commit(0x20F8, 0x2100),
        ],
    );
    feldera.drive(&mut s);
    assert_eq!(s.confirmed, Lsn(0x2100));
    assert_eq!(s.feldera.keys("users").len(), 1, "only user 9 is left");
    let trace = s.take_trace();
    let commit = trace.find("POST /commit_transaction").unwrap();
    let keys = trace.find("GET query SELECT \"users\"").unwrap();
    assert!(commit < keys, "{trace}");
    rule!(
        "A TRUNCATE inside a source transaction that already has a batch in a Feldera transaction: the retraction reads Feldera's keys, which only committed data shows, so the open transaction is committed first (views see the rows before the TRUNCATE); then every key is deleted and verified, and the rest of the source transaction follows.",
        trace
    );
}

#[test]
fn the_feldera_transaction_closes_at_the_source_commit_however_the_batches_were_cut() {
    // Four rows in batches of two: the second batch is cut at the fourth row, before the
    // commit is read; the commit, with nothing buffered, closes the transaction.
    let mut s = large(&[]);
    let mut feldera = Feldera::default();
    insert_tx(&mut s, 701, 0x2100, &["1", "2", "3", "4"]);
    feldera.drive(&mut s);
    assert_eq!(s.confirmed, Lsn(0x2100));
    let exact = s.take_trace();
    // Three rows with a 50 ms linger: the commit cuts the last row at once, so the batch
    // ends at the commit and the next transaction stays out of it.
    let mut s = large(&[("BATCH_LINGER_MS", "50")]);
    let mut feldera = Feldera::default();
    insert_tx(&mut s, 701, 0x2100, &["1", "2", "3"]);
    insert_tx(&mut s, 702, 0x2200, &["4"]);
    feldera.drive(&mut s);
    s.advance(50);
    feldera.drive(&mut s);
    assert_eq!(s.confirmed, Lsn(0x2200));
    let lingering = s.take_trace();
    assert!(lingering.contains("#2 cut (commit)"), "{lingering}");
    rule!(
        "A Feldera transaction closes at the first source commit: when the last batch was cut right before the commit, the commit closes the transaction; when rows are still buffered, the commit cuts them (whatever BATCH_LINGER_MS says) so the closing batch ends exactly there and the next source transaction is not split.",
        format!("== 4 rows in batches of 2\n{exact}== 3 rows in batches of 2, linger 50 ms, then another transaction\n{lingering}")
    );
}

#[test]
fn the_newest_token_of_a_table_is_the_later_batch_s_even_when_it_is_accepted_first() {
    // Batch #1 holds users 1 and items a; batch #2 users 2 (two rows per batch). users'
    // second request goes out once its first is answered, and is answered before items':
    // #2 is accepted before #1.
    let mut s = large(&[]);
    s.wal(
        "tx: insert users 1; insert items a; insert users 2",
        &[
            begin(0x2100, 700),
            relation(&items()),
            insert(0x2010, 16384, &[Some("1"), None, None]),
            insert(0x2020, 16390, &[Some("a"), Some("3")]),
            insert(0x2030, 16384, &[Some("2"), None, None]),
            commit(0x20F8, 0x2100),
        ],
    );
    s.answer(200, r#"{"transaction_id":1}"#);
    let users_first = s
        .waiting()
        .iter()
        .position(|w| w.contains("/ingress/users"));
    s.bring_forward(users_first.expect("users' first request waits"));
    s.accept();
    let users_second = s
        .waiting()
        .iter()
        .position(|w| w.contains("/ingress/users"));
    s.bring_forward(users_second.expect("users' second request waits"));
    s.accept();
    s.accept();
    let asked: Vec<String> = s
        .waiting()
        .into_iter()
        .filter(|w| w.contains("completion_status"))
        .collect();
    assert_eq!(asked.len(), 2, "one question per table: {asked:?}");
    // Both batches left the window; the transaction holds them until its commit.
    assert_eq!(s.pipeline().health().batches_in_flight, 2);
    assert!(
        asked.iter().any(|w| w.ends_with("t2")),
        "users' newest token is batch #2's t2: {asked:?}"
    );
    assert!(!asked.iter().any(|w| w.ends_with("t1")), "{asked:?}");
    let mut feldera = Feldera {
        open: true,
        started: 1,
    };
    feldera.drive(&mut s);
    assert_eq!(s.confirmed, Lsn(0x2100));
    rule!(
        "Inside a Feldera transaction each table's newest token is the one of the latest batch on that table, not the one accepted last: a batch with two tables is accepted when its slower table answers, possibly after a later batch. Asking about an older token could commit and acknowledge before the later batch's rows are in.",
        s.take_trace()
    );
}

#[test]
fn a_commit_of_an_ended_session_still_out_holds_back_the_next_session_s_transaction() {
    let mut s = large(&[]);
    let mut feldera = Feldera::default();
    insert_tx(&mut s, 701, 0x2100, &["1", "2", "3"]);
    // Run the transaction up to its commit_transaction, which Feldera does not answer yet.
    while !s
        .waiting()
        .first()
        .is_some_and(|l| l.contains("/commit_transaction"))
    {
        assert!(feldera.step(&mut s), "the commit is sent");
    }
    s.disconnect();
    s.advance(1000);
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    insert_tx(&mut s, 701, 0x2100, &["1", "2", "3"]);
    assert!(
        !s.waiting().iter().any(|l| l.contains("/start_transaction")),
        "no transaction starts while the old commit is out: {:?}",
        s.waiting()
    );
    // Feldera handles the old commit now: the transaction it closes is the old one's.
    feldera.step(&mut s);
    feldera.drive(&mut s);
    assert_eq!((s.confirmed, rows(&s)), (Lsn(0x2100), 3));
    assert!(!feldera.open);
    rule!(
        "A session ends while its commit_transaction is out. The next session's replay needs a Feldera transaction but starts none until that commit ended: had it adopted the still-open transaction, the old commit arriving late would have committed half of the replayed source transaction.",
        s.take_trace()
    );
}

/// Feldera whose commit takes `commit_ms` from its start: until then every token of the
/// transaction is in the circuit but not complete.
struct SlowCommit {
    feldera: Feldera,
    commit_ms: u64,
    committed_at: Option<crate::time::Mono>,
}

impl SlowCommit {
    fn new(commit_ms: u64) -> SlowCommit {
        SlowCommit {
            feldera: Feldera::default(),
            commit_ms,
            committed_at: None,
        }
    }

    /// Answers what waits, letting `ms` pass in steps of 100 ms; stops at an exit.
    fn run_for(&mut self, s: &mut Script, ms: u64) {
        for _ in 0..ms / 100 {
            self.answer_waiting(s);
            if s.exit().is_some() {
                return;
            }
            s.advance(100);
        }
        self.answer_waiting(s);
    }

    fn answer_waiting(&mut self, s: &mut Script) {
        for _ in 0..100 {
            if s.exit().is_some() {
                return;
            }
            let Some(front) = s.waiting().first().cloned() else {
                return;
            };
            let now = s.now().mono;
            if front.contains("/commit_transaction") {
                self.committed_at = Some(now);
                self.feldera.open = false;
                s.answer(200, COMMIT_STARTED);
            } else if front.contains("/completion_status")
                && self
                    .committed_at
                    .is_some_and(|at| now.since(at) < self.commit_ms * 1000)
            {
                s.in_circuit();
            } else {
                self.feldera.step(s);
            }
        }
    }
}

#[test]
fn a_source_transaction_streaming_longer_than_the_no_progress_timeout_is_not_given_up() {
    let mut s = large(&[("NO_PROGRESS_TIMEOUT_SECS", "2")]);
    let mut feldera = SlowCommit::new(0);
    s.wal("tx 701 begins", &[begin(0x9000, 701)]);
    // Forty rows in twenty batches, two rows every 500 ms: ten seconds of streaming, five
    // times the no-progress timeout, nothing durable before the commit.
    for i in 0..20u64 {
        let (a, b) = ((2 * i + 1).to_string(), (2 * i + 2).to_string());
        s.wal(
            &format!("two more rows of tx 701 ({a}, {b})"),
            &[
                insert(0x8F00 + 12 * i, 16384, &[Some(&a), Some("n"), None]),
                insert(0x8F06 + 12 * i, 16384, &[Some(&b), Some("n"), None]),
            ],
        );
        feldera.run_for(&mut s, 500);
        if let Some(exit) = s.exit().cloned() {
            panic!("given up after {i} batches: {exit:?}\n{}", s.take_trace());
        }
        assert_eq!(s.confirmed, START);
    }
    s.wal("tx 701 commits", &[commit(0x9000, 0x9008)]);
    feldera.run_for(&mut s, 500);
    assert_eq!(s.exit(), None);
    assert_eq!((s.confirmed, rows(&s)), (Lsn(0x9008), 40));
    let trace = s.take_trace();
    assert_eq!(
        trace.matches("POST /start_transaction").count(),
        1,
        "{trace}"
    );
}

#[test]
fn a_commit_may_take_the_completion_timeout_of_each_of_its_batches() {
    let mut s = large(&[
        ("FELDERA_COMPLETION_TIMEOUT_MS", "1000"),
        ("NO_PROGRESS_TIMEOUT_SECS", "1"),
    ]);
    insert_tx(&mut s, 701, 0x2100, &["0"]);
    let mut feldera = SlowCommit::new(0);
    feldera.run_for(&mut s, 100);
    assert_eq!(s.confirmed, Lsn(0x2100));
    s.take_trace();
    // Five rows in three batches: a commit that takes 2.5 s is within 3 × 1000 ms, and
    // the no-progress timeout (1 s) does not end the process while Feldera commits.
    feldera.commit_ms = 2500;
    insert_tx(&mut s, 702, 0x2200, &["1", "2", "3", "4", "5"]);
    feldera.run_for(&mut s, 3000);
    assert_eq!(s.exit(), None);
    assert_eq!((s.confirmed, rows(&s)), (Lsn(0x2200), 6));
    let trace = s.take_trace();
    assert!(!trace.contains("not committed after"), "{trace}");
    assert!(!trace.contains("session 1 ended"), "{trace}");
    rule!(
        "A Feldera transaction of three batches whose commit takes 2.5 s, with FELDERA_COMPLETION_TIMEOUT_MS=1000 and NO_PROGRESS_TIMEOUT_SECS=1: the commit may take the completion timeout of each of its batches (3 s), and a commit under way is not a stall; the transaction is acknowledged when its tokens complete.",
        trace
    );
}

#[test]
fn a_replay_that_gets_no_further_than_the_commit_it_repeats_is_given_up() {
    let mut s = large(&[
        ("FELDERA_COMPLETION_TIMEOUT_MS", "1000"),
        ("NO_PROGRESS_TIMEOUT_SECS", "4"),
    ]);
    // A commit that never finishes.
    let mut feldera = SlowCommit::new(u64::MAX / 2000);
    insert_tx(&mut s, 701, 0x2100, &["1", "2", "3", "4", "5"]);
    feldera.run_for(&mut s, 3100);
    assert_eq!(
        s.exit(),
        None,
        "the first commit is waited for: 3 batches × 1000 ms"
    );
    let first = s.take_trace();
    assert!(first.contains("not committed after 3000 ms"), "{first}");
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    insert_tx(&mut s, 701, 0x2100, &["1", "2", "3", "4", "5"]);
    feldera.run_for(&mut s, 4000);
    let replay = s.take_trace();
    assert_eq!(s.exit().map(|e| e.0), Some(69), "{replay}");
    assert!(
        replay.contains("POST /commit_transaction"),
        "the replay got as far as its commit: {replay}"
    );
    assert!(
        !replay.contains("session 2 ended"),
        "given up during the replay's commit, which got no further than the first: {replay}"
    );
    assert_eq!(s.confirmed, START);
    rule!(
        "A commit that never finishes: the first one is waited for (3 batches × FELDERA_COMPLETION_TIMEOUT_MS=1000) and times out; the replay of the same source transaction reaches no further in the WAL, so neither its batches nor its commit count as progress, and NO_PROGRESS_TIMEOUT_SECS=4 (counted from the last batch the first try got further with) ends the process with 69.",
        format!("== first try\n{first}== replay\n{replay}")
    );
}
