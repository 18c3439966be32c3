//! TRUNCATE propagated as retractions: what came before is made durable first, every key
//! Feldera holds is deleted in pages, the table is verified empty, and only then does the
//! rest of the transaction go on; its commit is acknowledged like any other.
use super::*;
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
    s.wal(
        "tx 700: TRUNCATE users",
        &[
            begin(0x2100, 700),
            truncate(0x2010, &[16384]),
            commit(0x20F8, 0x2100),
        ],
    );
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
    s.wal(
        "tx 700: INSERT 5 (committed, still lingering in the outbox)",
        &[
            begin(0x2100, 700),
            insert(0x2008, 16384, &[Some("5"), Some("n"), None]),
            commit(0x20F8, 0x2100),
        ],
    );
    s.wal(
        "tx 701: INSERT 6; TRUNCATE users",
        &[
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
fn a_truncate_of_25000_keys_reads_three_pages_and_deletes_in_bounded_batches() {
    let mut s = streaming(&[("RETRACT_PAGE_ROWS", "10000"), ("BATCH_MAX_ROWS", "4000")]);
    seed_users(&mut s, 0..25_000);
    s.wal(
        "tx 700: TRUNCATE users (Feldera holds 25,000 keys)",
        &[
            begin(0x2100, 700),
            truncate(0x2010, &[16384]),
            commit(0x20F8, 0x2100),
        ],
    );
    drive(&mut s);
    assert_eq!(s.feldera.rows("users"), 0);
    assert_eq!(s.confirmed, Lsn(0x2100));
    let trace = s.take_trace();
    assert_eq!(
        trace.matches("GET query SELECT \"users\"").count(),
        3,
        "{trace}"
    );
    rule!(
        "25,000 keys with RETRACT_PAGE_ROWS=10000 are read in three keyset pages (each after the last key of the one before) and deleted in batches of at most BATCH_MAX_ROWS=4000, each awaited to complete; the count then says 0 and the commit is acknowledged.",
        trace
    );
}

#[test]
fn a_count_that_stays_non_zero_exits_1_without_acknowledging() {
    let mut s = streaming(&[]);
    seed_users(&mut s, 1..3);
    s.wal(
        "tx 700: TRUNCATE users",
        &[
            begin(0x2100, 700),
            truncate(0x2010, &[16384]),
            commit(0x20F8, 0x2100),
        ],
    );
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
fn an_unparseable_key_page_is_never_proof_that_nothing_needs_retracting() {
    let mut s = streaming(&[]);
    seed_users(&mut s, 1..3);
    s.wal(
        "tx 700: TRUNCATE users",
        &[
            begin(0x2100, 700),
            truncate(0x2010, &[16384]),
            commit(0x20F8, 0x2100),
        ],
    );
    assert!(s.waiting_query().is_some());
    s.answer(200, "[{\"k0\": \"not a number\"}]");
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    assert_eq!(s.confirmed, START, "nothing acknowledged");
    rule!(
        "A key page that cannot be read (here a string where BIGINT keys are) is never taken as an empty page: slotline exits 1 and acknowledges nothing.",
        s.take_trace()
    );
}

#[test]
fn a_crash_after_the_query_and_mid_delete_leaves_the_transaction_unacknowledged() {
    let mut out = String::new();
    for (point, after) in [("retract_after_query", "1"), ("retract_mid_delete", "2")] {
        let mut s = streaming(&[
            ("RETRACT_PAGE_ROWS", "2"),
            ("CRASH_AT", point),
            ("CRASH_AFTER_BATCHES", after),
        ]);
        seed_users(&mut s, 1..6);
        s.wal(
            "tx 700: TRUNCATE users",
            &[
                begin(0x2100, 700),
                truncate(0x2010, &[16384]),
                commit(0x20F8, 0x2100),
            ],
        );
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
        "retract_after_query exits 70 once a page of keys was read and before any delete; retract_mid_delete when the 2nd delete batch is durable and keys remain. Neither acknowledges the TRUNCATE's transaction: a restart replays it and converges (last lines of each trace).",
        out
    );
}

#[test]
fn a_truncate_first_in_its_session_settles_a_feldera_transaction_left_open_before_reading_keys() {
    let mut s = streaming(&[("FELDERA_TRANSACTIONS", "large")]);
    seed_users(&mut s, 1..4);
    s.transaction_open = true;
    s.wal(
        "tx 700: TRUNCATE users (replayed first thing in this session)",
        &[
            begin(0x2100, 700),
            truncate(0x2010, &[16384]),
            commit(0x20F8, 0x2100),
        ],
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
