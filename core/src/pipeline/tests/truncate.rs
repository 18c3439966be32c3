//! TRUNCATE propagated as retractions: what came before is made durable first, every key
//! Feldera holds is deleted in pages, the table is verified empty, and only then does the
//! rest of the transaction go on; its commit is acknowledged like any other.
use super::*;
use crate::health::PhaseName;
use crate::Lsn;

/// Feldera's users table holds `ids`.
fn seed_users(s: &mut Script, ids: impl Iterator<Item = u32>) {
    let body: String = ids
        .map(|id| format!("{{\"insert\":{{\"id\":{id},\"name\":\"old\"}}}}\n"))
        .collect();
    s.feldera.apply("users", &body);
}

fn keys(s: &Script, table: &str) -> Vec<String> {
    s.feldera
        .keys(table)
        .iter()
        .map(|k| k.to_string())
        .collect()
}

/// Answers Feldera as it would until nothing waits.
/// Transaction 700: a TRUNCATE of users alone, committed at 0/2100.
fn truncate_users(s: &mut Script, what: &str) {
    s.wal(
        what,
        &[
            begin(0x2100, 700),
            truncate(0x2010, &[16384]),
            commit(0x20F8, 0x2100),
        ],
    );
}

fn drive(s: &mut Script) {
    for _ in 0..1000 {
        if s.exit().is_some() {
            return;
        }
        if !s.step() {
            s.advance(10);
            if s.waiting_requests() == 0 {
                return;
            }
        }
    }
}

#[test]
fn truncate_alone_deletes_every_key_verifies_empty_then_acknowledges() {
    let mut s = streaming(&[]);
    seed_users(&mut s, 1..4);
    truncate_users(&mut s, "tx 700: TRUNCATE users");
    drive(&mut s);
    assert_eq!(keys(&s, "users"), Vec::<String>::new());
    assert_eq!(s.confirmed, Lsn(0x2100), "acknowledged once verified");
    rule!(
        "A TRUNCATE reads the keys Feldera holds, deletes each in a batch that is awaited to complete, checks with a count that the table is empty, and only then reads on: the commit is acknowledged (0/2100) after all of that is durable.",
        s.take_trace()
    );
}

#[test]
fn inserts_after_a_truncate_in_the_same_transaction_survive_and_rows_before_it_are_dropped() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "5000")]);
    seed_users(&mut s, 1..4);
    s.wal(
        "tx 700: INSERT 5; TRUNCATE users; INSERT 6, 7",
        &[
            begin(0x2100, 700),
            insert(0x2008, 16384, &[Some("5"), Some("n"), None]),
            truncate(0x2010, &[16384]),
            insert(0x2020, 16384, &[Some("6"), Some("n"), None]),
            insert(0x2030, 16384, &[Some("7"), Some("n"), None]),
            commit(0x20F8, 0x2100),
        ],
    );
    drive(&mut s);
    s.advance(5000);
    drive(&mut s);
    assert_eq!(keys(&s, "users"), ["6", "7"]);
    assert_eq!(s.confirmed, Lsn(0x2100));
    assert!(
        !s.completed_lines().iter().any(|l| l.contains("\"id\":5")),
        "the row inserted before the TRUNCATE is never sent"
    );
    rule!(
        "Rows of the truncated table buffered earlier in the transaction are dropped (PostgreSQL dropped them); after the retraction is verified the inserts that follow the TRUNCATE are sent, and Feldera holds exactly them.",
        s.take_trace()
    );
}

#[test]
fn rows_of_an_earlier_commit_still_buffered_are_sent_before_a_truncate_and_both_commits_are_acknowledged(
) {
    let mut s = streaming(&[("BATCH_LINGER_MS", "5000")]);
    // Both transactions arrive in one read: tx 700's row is still in the outbox (more of
    // the stream is already there) when tx 701's TRUNCATE is read.
    s.wal(
        "tx 700: INSERT 5; tx 701: INSERT 6; TRUNCATE users",
        &[
            begin(0x2100, 700),
            insert(0x2008, 16384, &[Some("5"), Some("n"), None]),
            commit(0x20F8, 0x2100),
            begin(0x2200, 701),
            insert(0x2108, 16384, &[Some("6"), Some("n"), None]),
            truncate(0x2110, &[16384]),
            commit(0x21F8, 0x2200),
        ],
    );
    drive(&mut s);
    assert_eq!(keys(&s, "users"), Vec::<String>::new());
    assert_eq!(
        s.confirmed,
        Lsn(0x2200),
        "no later change arrives: the commits must not wait for a batch that is never cut"
    );
    assert!(
        s.completed_lines().iter().any(|l| l.contains("\"id\":5")),
        "the committed row is sent before the retraction (which then deletes it)"
    );
    assert!(
        !s.completed_lines().iter().any(|l| l.contains("\"id\":6")),
        "the truncating transaction's own earlier row is never sent"
    );
    rule!(
        "A TRUNCATE drops only its own transaction's buffered rows of the table: the row of the earlier commit (tx 700) still lingering in the outbox is cut and made durable before the retraction, so both commits are acknowledged with nothing after them in the stream.",
        s.take_trace()
    );
}

#[test]
fn two_tables_truncated_at_once_are_retracted_one_after_the_other() {
    let mut s = streaming(&[]);
    s.wal("Relation items", &[relation(&super::items())]);
    seed_users(&mut s, 1..3);
    s.feldera.apply(
        "lineitems",
        "{\"insert\":{\"sku\":\"a\",\"qty\":1}}\n{\"insert\":{\"sku\":\"b\",\"qty\":2}}\n",
    );
    s.wal(
        "tx 700: TRUNCATE users, items",
        &[
            begin(0x2100, 700),
            truncate(0x2010, &[16384, 16390]),
            commit(0x20F8, 0x2100),
        ],
    );
    drive(&mut s);
    assert_eq!(keys(&s, "users"), Vec::<String>::new());
    assert_eq!(keys(&s, "lineitems"), Vec::<String>::new());
    assert_eq!(s.confirmed, Lsn(0x2100));
    rule!(
        "One TRUNCATE of two routed tables retracts each table's keys in turn, then verifies both are empty before the commit is acknowledged.",
        s.take_trace()
    );
}

#[test]
fn a_truncate_of_25000_keys_reads_them_in_one_streamed_scan_and_deletes_in_bounded_batches() {
    let mut s = streaming(&[("BATCH_MAX_ROWS", "4000"), ("MAX_IN_FLIGHT_BATCHES", "2")]);
    s.set_pieces(64 * 1024);
    seed_users(&mut s, 0..25_000);
    truncate_users(&mut s, "tx 700: TRUNCATE users (Feldera holds 25,000 keys)");
    drive(&mut s);
    assert_eq!(s.feldera.rows("users"), 0);
    assert_eq!(s.confirmed, Lsn(0x2100));
    let trace = s.take_trace();
    assert_eq!(
        trace.matches("GET query").count(),
        2,
        "one scan, one count: {trace}"
    );
    assert_eq!(
        trace.matches("GET query SELECT \"users\"").count(),
        1,
        "{trace}"
    );
    // The answer is read piece by piece, each next piece only once the keys of the one
    // before are on their way as deletes: never the whole table in memory.
    let lines: Vec<&str> = trace.lines().collect();
    let reads: Vec<usize> = (0..lines.len())
        .filter(|i| lines[*i].contains("read on;"))
        .collect();
    assert!(reads.len() >= 4, "{trace}");
    for pair in reads.windows(2) {
        assert!(
            lines[pair[0]..pair[1]]
                .iter()
                .any(|l| l.contains("POST ingress users")),
            "deletes go out between two pieces: {trace}"
        );
    }
    rule!(
        "25,000 keys are read with one query whose answer streams in 64 KiB pieces; each piece's keys become deletes in batches of at most BATCH_MAX_ROWS=4000 (two in flight) before the next piece is read; once the answer ended and every delete completed, one count says 0 and the commit is acknowledged.",
        trace
    );
}

#[test]
fn a_count_that_stays_non_zero_exits_1_without_acknowledging() {
    let mut s = streaming(&[]);
    seed_users(&mut s, 1..3);
    truncate_users(&mut s, "tx 700: TRUNCATE users");
    for _ in 0..100 {
        if s.exit().is_some() {
            break;
        }
        match s.waiting_query() {
            // A writer outside slotline put a row back in.
            Some(sql) if sql.starts_with("SELECT COUNT(*)") => {
                s.answer(200, "{\"slotline_count\":1}")
            }
            _ => {
                s.step();
            }
        }
    }
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    assert_eq!(s.confirmed, START, "nothing acknowledged");
    rule!(
        "When the count after the durable deletes is not zero, slotline exits 1 naming the table and the count, and acknowledges nothing of the transaction.",
        s.take_trace()
    );
}

#[test]
fn an_unreadable_key_is_never_proof_that_nothing_needs_retracting() {
    let mut s = streaming(&[]);
    seed_users(&mut s, 1..3);
    truncate_users(&mut s, "tx 700: TRUNCATE users");
    assert!(s.waiting_query().is_some());
    s.answer(200, "{\"k0\": 1}\n{\"k0\": \"not a number\"}\n");
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    assert_eq!(s.confirmed, START, "nothing acknowledged");
    rule!(
        "A key that cannot be read (here a string where BIGINT keys are) is never skipped: slotline exits 1 and acknowledges nothing.",
        s.take_trace()
    );
}

#[test]
fn a_key_scan_that_fails_while_streaming_concludes_nothing() {
    let rows: String = (1..=6).map(|k| format!("{{\"k0\":{k}}}\n")).collect();
    let mut out = String::new();
    for (case, body, fail_after, exit) in [
        (
            "an error line after some rows",
            format!("{rows}{{\"error\":\"scan failed: out of memory\"}}\n"),
            None,
            None,
        ),
        (
            "the answer ends inside a line",
            format!("{rows}{{\"k0\":7"),
            None,
            Some(1),
        ),
        (
            "the connection times out after two pieces",
            rows.clone(),
            Some(2),
            None,
        ),
    ] {
        let mut s = streaming(&[("BATCH_MAX_ROWS", "2")]);
        s.set_pieces(20);
        if let Some(after) = fail_after {
            s.fail_streams_after(after, "timed out reading the answer");
        }
        seed_users(&mut s, 1..8);
        truncate_users(&mut s, "tx 700: TRUNCATE users");
        for _ in 0..200 {
            if s.exit().is_some() || s.pipeline().health().phase == PhaseName::BackingOff {
                break;
            }
            if s.waiting_query()
                .is_some_and(|q| !q.starts_with("SELECT COUNT"))
            {
                s.answer(200, &body);
            } else if !s.step() {
                break;
            }
        }
        assert_eq!(s.exit().map(|e| e.0), exit, "{case}");
        assert_eq!(s.confirmed, START, "{case}: nothing acknowledged");
        let trace = s.take_trace();
        assert!(
            !trace.contains("SELECT COUNT"),
            "{case}: never counted: {trace}"
        );
        if case.starts_with("an error line") {
            assert!(
                trace.contains("-> http#2 cancel"),
                "{case}: the rest of the answer is not read: {trace}"
            );
        }
        out.push_str(&format!("== {case}\n"));
        for line in trace.lines().filter(|l| {
            l.contains("policy")
                || l.contains("exit")
                || l.contains("read on")
                || l.contains("streamed")
        }) {
            out.push_str(line);
            out.push('\n');
        }
    }
    rule!(
        "A key scan that fails while its answer streams (an error line after some rows, an answer ending inside a line, a transport failure between pieces) never passes for the whole key set: the deletes of the keys read so far may go out, but nothing is counted or acknowledged. A failure Feldera may recover from ends the session (the replay reads the keys again); an answer that cannot be read exits 1.",
        out
    );
}

#[test]
fn a_crash_after_the_query_and_mid_delete_leaves_the_transaction_unacknowledged() {
    let mut out = String::new();
    for (point, after) in [("retract_after_query", "1"), ("retract_mid_delete", "2")] {
        let mut s = streaming(&[
            ("BATCH_MAX_ROWS", "2"),
            ("CRASH_AT", point),
            ("CRASH_AFTER_BATCHES", after),
        ]);
        seed_users(&mut s, 1..6);
        truncate_users(&mut s, "tx 700: TRUNCATE users");
        drive(&mut s);
        assert_eq!(s.exit().map(|e| e.0), Some(70), "{point}");
        assert_eq!(s.confirmed, START, "{point}");
        let trace = s.take_trace();
        out.push_str(&format!(
            "== CRASH_AT={point} CRASH_AFTER_BATCHES={after}\n"
        ));
        for line in trace
            .lines()
            .rev()
            .take(3)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            out.push_str(line);
            out.push('\n');
        }
    }
    rule!(
        "retract_after_query exits 70 once the first piece of the key scan was read and before any delete; retract_mid_delete when the 2nd delete batch is durable and keys remain. Neither acknowledges the TRUNCATE's transaction: a restart replays it and converges (last lines of each trace).",
        out
    );
}

#[test]
fn a_truncate_first_in_its_session_settles_a_feldera_transaction_left_open_before_reading_keys() {
    let mut s = streaming(&[("FELDERA_TRANSACTIONS", "large")]);
    seed_users(&mut s, 1..4);
    s.transaction_open = true;
    truncate_users(
        &mut s,
        "tx 700: TRUNCATE users (replayed first thing in this session)",
    );
    drive(&mut s);
    assert!(!s.transaction_open, "the open transaction was committed");
    assert_eq!(keys(&s, "users"), Vec::<String>::new());
    assert_eq!(s.confirmed, Lsn(0x2100));
    let trace = s.take_trace();
    assert!(
        trace.find("POST /commit_transaction").unwrap() < trace.find("GET query").unwrap(),
        "{trace}"
    );
    rule!(
        "A replayed TRUNCATE is the session's first Feldera work while a transaction is left open: its key query would miss what the transaction holds and its deletes would join it and never complete. The query waits until start_transaction (409) and commit_transaction settled the old transaction; then keys are read, deleted and verified as usual.",
        trace
    );
}

#[test]
fn a_truncate_reads_a_table_only_after_an_ended_sessions_request_to_it_ended() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "10")]);
    // Session 1 reads tx 700's insert; the linger cuts it into a batch and posts it.
    s.wal(
        "tx 700 (begin, insert users 1)",
        &[
            begin(0x2100, 700),
            insert(0x2010, 16384, &[Some("1"), Some("n"), None]),
        ],
    );
    s.advance(10);
    assert_eq!(
        s.waiting_requests(),
        1,
        "the insert's ingress request is out"
    );
    // The session ends with that request still uploading.
    s.disconnect();
    s.advance(1_000);
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    s.wal(
        "tx 700 again: insert users 1, TRUNCATE users",
        &[
            begin(0x2100, 700),
            insert(0x2010, 16384, &[Some("1"), Some("n"), None]),
            truncate(0x2020, &[16384]),
            commit(0x20F8, 0x2100),
        ],
    );
    assert!(
        s.waiting().iter().all(|w| !w.contains("/query")),
        "no key query while session 1's request to users may still land rows: {:?}",
        s.waiting()
    );
    // Session 1's request ends: its rows have landed, and now the keys are read.
    s.accept();
    assert!(
        s.waiting().iter().any(|w| w.contains("/query")),
        "the key query goes out once that request ended: {:?}",
        s.waiting()
    );
    drive(&mut s);
    assert_eq!(s.confirmed, Lsn(0x2100));
    rule!(
        "Session 1 posts tx 700's insert and ends while that request is still out. Session 2 replays tx 700, whose TRUNCATE must read users' keys: the query waits until session 1's request ended, since rows it still delivers would otherwise land after the keys were read and survive the TRUNCATE for good.",
        s.take_trace()
    );
}

#[test]
fn key_scans_and_counts_get_query_timeout_secs_and_a_timeout_concludes_nothing() {
    let mut s = streaming(&[("QUERY_TIMEOUT_SECS", "45")]);
    seed_users(&mut s, 1..4);
    truncate_users(&mut s, "tx 700: TRUNCATE users");
    assert!(
        s.waiting_query()
            .is_some_and(|q| !q.starts_with("SELECT COUNT")),
        "the key scan waits"
    );
    assert_eq!(
        s.waiting_timeout_ms(),
        Some(45_000),
        "the scan has QUERY_TIMEOUT_SECS, not the 10 s of completion polls"
    );
    // The shell gives up on the scan after QUERY_TIMEOUT_SECS.
    s.fail("timed out after 45 s");
    assert_eq!(s.confirmed, START, "nothing acknowledged");
    assert_eq!(s.pipeline().health().phase, PhaseName::BackingOff);
    assert_eq!(
        keys(&s, "users").len(),
        3,
        "no key deleted on a scan that never answered"
    );
    // The next session replays the TRUNCATE from the slot and reads the keys again; its
    // count has the same timeout.
    for _ in 0..100 {
        if s.pipeline().health().streaming {
            break;
        }
        s.advance(100);
    }
    // A new session: the Relation comes again before the replayed TRUNCATE.
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    truncate_users(&mut s, "tx 700: TRUNCATE users (replayed)");
    for _ in 0..100 {
        if s.waiting_query()
            .is_some_and(|q| q.starts_with("SELECT COUNT"))
        {
            break;
        }
        if !s.step() {
            s.advance(10);
        }
    }
    assert_eq!(
        s.waiting_query().map(|q| q.starts_with("SELECT COUNT")),
        Some(true),
        "the replay reached the count"
    );
    assert_eq!(s.waiting_timeout_ms(), Some(45_000));
    drive(&mut s);
    assert_eq!(s.confirmed, Lsn(0x2100), "acknowledged once verified");
    rule!(
        "Key scans and counts are sent with QUERY_TIMEOUT_SECS (here 45 s) as their timeout, not the 10 s of completion polls; a scan the shell gives up on concludes nothing: the session ends with the TRUNCATE unacknowledged and no key deleted, and the replay reads the keys again.",
        s.take_trace()
    );
}
