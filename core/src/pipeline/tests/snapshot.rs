//! The initial snapshot: the copy's phases (plan, slot with an exported snapshot, workers,
//! ranges, batches, `complete`, streaming from the consistent point), leftovers, crash
//! points and the startup plan's rows as the pipeline executes them.
use super::*;
use crate::Lsn;

fn user_rows(ids: std::ops::Range<u32>) -> Vec<Vec<Option<String>>> {
    ids.map(|i| vec![Some(i.to_string()), Some(format!("n{i}")), None])
        .collect()
}

fn item_rows(count: u32) -> Vec<Vec<Option<String>>> {
    (0..count)
        .map(|i| vec![Some(format!("sku{i}")), Some(i.to_string())])
        .collect()
}

/// A database whose tables hold rows, and no slot yet.
fn seeded(users_ids: std::ops::Range<u32>, users_blocks: u64, items: u32) -> FakePg {
    let mut pg = pg();
    pg.slot_confirmed = None;
    pg.tables = vec![
        users(ReplicaIdentity::Default).with_rows(user_rows(users_ids), users_blocks),
        super::items().with_rows(item_rows(items), 1),
    ];
    pg
}

fn snapshot(extra: &[(&str, &str)], pg: FakePg) -> Script {
    let mut pairs = vec![TABLES, ("SNAPSHOT_MODE", "initial")];
    pairs.extend_from_slice(extra);
    Script::new(&pairs, pg, SCHEMA)
}

/// Answers Feldera (ingress, completion, queries) until the stream is open or the process
/// exited.
pub(super) fn run_until_streaming(s: &mut Script) {
    for _ in 0..200 {
        if s.exit().is_some() || s.pipeline().health().streaming {
            return;
        }
        s.settle();
        s.advance(10);
    }
    panic!("the snapshot never finished:\n{}", s.take_trace());
}

fn state(s: &Script) -> String {
    String::from_utf8_lossy(s.state_file.as_deref().unwrap_or_default()).into_owned()
}

#[test]
fn fresh_start_copies_every_table_then_streams_from_the_consistent_point() {
    let mut s = snapshot(&[("SNAPSHOT_WORKERS", "2")], seeded(1..4, 1, 2));
    run_until_streaming(&mut s);
    assert_eq!(s.exit(), None);
    assert_eq!(s.feldera.rows("users"), 3);
    assert_eq!(s.feldera.rows("lineitems"), 2);
    assert!(
        state(&s).contains("\"phase\": \"complete\""),
        "{}",
        state(&s)
    );
    assert!(
        state(&s).contains("\"consistent_point\": \"0/1000\""),
        "{}",
        state(&s)
    );
    rule!(
        "A fresh start writes the state file pending, creates the slot exporting a snapshot, checks Feldera's tables are empty, copies every table on workers that imported the snapshot, waits until every batch is complete, writes the state file complete, and only then starts replication, from the slot's consistent point 0/1000.",
        s.take_trace()
    );
}

#[test]
fn one_large_table_is_cut_into_ranges_that_every_worker_takes() {
    let mut s = snapshot(
        &[("SNAPSHOT_WORKERS", "3"), ("BATCH_MAX_ROWS", "12500")],
        seeded(0..12_000, 12_000, 0),
    );
    run_until_streaming(&mut s);
    assert_eq!(s.feldera.rows("users"), 12_000, "every row, once");
    let trace = s.take_trace();
    let copies: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("query COPY (SELECT \"id\""))
        .collect();
    assert_eq!(copies.len(), 12, "3 workers x 4 ranges:\n{trace}");
    let workers: std::collections::BTreeSet<&str> = copies
        .iter()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    assert!(workers.len() > 1, "ranges spread over workers: {workers:?}");
    rule!(
        "A table of 12,000 blocks with 3 workers is copied in 12 ranges of 1,000 blocks (the last open-ended), each handed to whichever worker is free (worker pg#2 first waits for Feldera's emptiness count); a summary ends the copy (only COPY statements and snapshot lines shown).",
        trace
            .lines()
            .filter(|l| l.contains("COPY") || l.contains("snapshot "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn rows_feldera_holds_that_the_snapshot_lacks_are_retracted_then_counted() {
    let mut pg = seeded(1..4, 1, 0);
    pg.slot_confirmed = Some(START);
    let mut s = snapshot(&[("SNAPSHOT_WORKERS", "1")], pg);
    s.feldera.apply(
        "users",
        "{\"insert\":{\"id\":2,\"name\":\"old\"}}\n{\"insert\":{\"id\":99,\"name\":\"ghost\"}}\n",
    );
    run_until_streaming(&mut s);
    assert_eq!(s.exit(), None);
    let keys: Vec<String> = s
        .feldera
        .keys("users")
        .iter()
        .map(|k| k.to_string())
        .collect();
    assert_eq!(keys, ["1", "2", "3"], "99 retracted, 2 overwritten");
    rule!(
        "A slot without a state file is no proof Feldera was seeded: the slot is dropped and recreated, Feldera's keys are read page by page and checked against PostgreSQL under the snapshot (99 is gone, 2 is kept), the leftover is deleted, the copy runs, and Feldera's count must equal the rows copied before the state file says complete.",
        s.take_trace()
    );
}

#[test]
fn a_count_that_disagrees_after_the_retraction_exits_1_leaving_the_state_pending() {
    let mut pg = seeded(1..3, 1, 0);
    pg.slot_confirmed = Some(START);
    let mut s = snapshot(&[("SNAPSHOT_WORKERS", "1")], pg);
    for _ in 0..100 {
        if s.exit().is_some() {
            break;
        }
        match s.waiting_query() {
            // Feldera claims one row more than the copy delivered.
            Some(sql) if sql.starts_with("SELECT COUNT(*)") => s.answer(
                200,
                &format!("{{\"slotline_count\":{}}}", s.feldera.rows("users") + 1),
            ),
            _ => {
                s.step();
            }
        }
        s.advance(10);
    }
    assert_eq!(s.exit().map(|e| e.0), Some(1), "{}", s.take_trace());
    assert!(state(&s).contains("\"phase\": \"pending\""));
    let trace = s.take_trace();
    rule!(
        "When Feldera's count after the copy and the retraction differs from the rows copied, the start exits 1 and the state file stays pending (the next start copies again); nothing is streamed or acknowledged (the end of the trace).",
        trace.lines().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    );
}

fn crash(point: &str, after: &str) -> Script {
    let mut s = snapshot(
        &[
            ("SNAPSHOT_WORKERS", "1"),
            ("BATCH_MAX_ROWS", "2"),
            ("CRASH_AT", point),
            ("CRASH_AFTER_BATCHES", after),
        ],
        seeded(1..8, 1, 0),
    );
    for _ in 0..100 {
        if s.exit().is_some() {
            break;
        }
        s.settle();
        s.advance(10);
    }
    assert_eq!(s.exit().map(|e| e.0), Some(70), "{point}");
    assert!(
        state(&s).contains("\"phase\": \"pending\""),
        "{point}: {}",
        state(&s)
    );
    assert!(!s.pipeline().health().streaming);
    s
}

#[test]
fn crash_points_of_the_snapshot_leave_the_state_pending() {
    let mut tails = String::new();
    for (point, after) in [
        ("snapshot_mid_copy", "2"),
        ("snapshot_before_complete", "1"),
    ] {
        let mut s = crash(point, after);
        let trace = s.take_trace();
        let tail: Vec<&str> = trace.lines().rev().take(3).collect();
        tails.push_str(&format!(
            "== CRASH_AT={point} CRASH_AFTER_BATCHES={after}\n"
        ));
        for line in tail.into_iter().rev() {
            tails.push_str(line);
            tails.push('\n');
        }
    }
    let mut pg = seeded(1..3, 1, 0);
    pg.slot_confirmed = None;
    let mut s = snapshot(&[("CRASH_AT", "snapshot_after_slot")], pg);
    assert_eq!(s.exit().map(|e| e.0), Some(70));
    let trace = s.take_trace();
    assert!(!trace.contains("COPY ("), "no row copied:\n{trace}");
    tails.push_str("== CRASH_AT=snapshot_after_slot\n");
    for line in trace
        .lines()
        .rev()
        .take(2)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        tails.push_str(line);
        tails.push('\n');
    }
    rule!(
        "snapshot_after_slot exits 70 once the slot exists, before any row is copied; snapshot_mid_copy when the 2nd snapshot batch is durable; snapshot_before_complete when every row is durable but the state file still says pending. In each the state file says pending, so the next start copies again (last lines of each trace).",
        tails
    );
}

#[test]
fn complete_state_with_its_slot_streams_without_copying() {
    let mut s = snapshot(&[], seeded(1..4, 1, 0));
    run_until_streaming(&mut s);
    let state_file = s.state_file.clone();
    // The same cluster, state file and slot: a restart streams.
    let mut pg = seeded(1..4, 1, 0);
    pg.slot_confirmed = Some(Lsn(0x1000));
    let mut again = Script::with_state(
        &[TABLES, ("SNAPSHOT_MODE", "initial")],
        pg,
        SCHEMA,
        state_file,
    );
    run_until_streaming(&mut again);
    let trace = again.take_trace();
    assert!(!trace.contains("COPY"), "{trace}");
    rule!(
        "A restart whose state file says complete for this cluster, slot, pipeline and routes, with the slot present, streams from the slot: nothing is copied again.",
        trace
    );
}

#[test]
fn an_unreadable_state_file_exits_1_creating_nothing() {
    let mut pg = seeded(1..4, 1, 0);
    pg.slot_confirmed = None;
    let s = Script::with_state(
        &[TABLES, ("SNAPSHOT_MODE", "initial")],
        pg,
        SCHEMA,
        Some(b"{\"version\": 1, \"phase\": \"compl".to_vec()),
    );
    let mut s = s;
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    let trace = s.take_trace();
    assert!(!trace.contains("CREATE_REPLICATION_SLOT"), "{trace}");
    assert!(!trace.contains("write state file"), "{trace}");
    rule!(
        "A state file that exists and cannot be read is never treated as absent: the start exits 1 naming the file and what is wrong, and creates nothing.",
        trace.lines().last().unwrap_or("")
    );
}

#[test]
fn inconsistent_mode_copies_first_and_creates_the_slot_afterwards() {
    let mut s = snapshot(&[("SNAPSHOT_MODE", "inconsistent")], seeded(1..3, 1, 1));
    run_until_streaming(&mut s);
    assert_eq!(s.exit(), None);
    let trace = s.take_trace();
    let copy = trace.find("COPY (").expect("copied");
    let create = trace.find("CREATE_REPLICATION_SLOT").expect("slot created");
    assert!(copy < create, "the copy comes first:\n{trace}");
    rule!(
        "SNAPSHOT_MODE=inconsistent copies in snapshots of the workers' own, then creates the slot with SNAPSHOT 'nothing' and streams from there: whatever was committed between a table's copy and the slot's creation is lost (the mode exists to show that loss).",
        trace
    );
}

#[test]
fn a_copy_first_commits_a_feldera_transaction_left_open_then_writes_outside_it() {
    let mut s = Script::with_state(
        &[
            TABLES,
            ("SNAPSHOT_MODE", "initial"),
            ("FELDERA_TRANSACTIONS", "large"),
        ],
        seeded(1..4, 1, 2),
        SCHEMA,
        None,
    );
    s.transaction_open = true;
    run_until_streaming(&mut s);
    assert_eq!(s.exit(), None);
    assert!(!s.transaction_open, "the open transaction was committed");
    assert_eq!(s.feldera.rows("users"), 3);
    let trace = s.take_trace();
    let first_ingress = trace.find("POST ingress").expect("the copy was sent");
    let commit = trace.find("POST /commit_transaction").expect("a commit");
    assert!(commit < first_ingress, "{trace}");
    rule!(
        "With FELDERA_TRANSACTIONS on, a transaction an earlier run left open would swallow the copy (nothing ingested completes before its commit). The copy's first request to Feldera waits: start_transaction answers 409, commit_transaction commits the old transaction, and only then do the copy's batches go out, outside any transaction.",
        trace
    );
}

#[test]
fn from_postgresql_17_every_connection_switches_transaction_timeout_off_before_its_first_query() {
    let pairs = [
        TABLES,
        ("SNAPSHOT_MODE", "initial"),
        ("SNAPSHOT_WORKERS", "2"),
        ("SLOT_CHECK_INTERVAL_MS", "1000"),
    ];
    let mut s = Script::new_tweaked(&pairs, seeded(1..4, 1, 2), SCHEMA, |s| {
        s.set_server_version("17.2")
    });
    run_until_streaming(&mut s);
    s.advance(1_500);
    s.settle();
    assert_eq!(s.exit(), None);
    let trace = s.take_trace();
    // The first query of each connection, in the order the connections opened.
    let mut first: Vec<(&str, &str)> = Vec::new();
    for line in trace.lines() {
        let mut words = line.split_whitespace().skip(2);
        let (Some(conn), Some(kind)) = (words.next(), words.next()) else {
            continue;
        };
        if !conn.starts_with("pg#") || kind != "query" || first.iter().any(|(c, _)| *c == conn) {
            continue;
        }
        let query = line.split(" query ").nth(1).unwrap_or_default();
        first.push((conn, query));
    }
    let opened = trace
        .lines()
        .filter(|l| l.contains(" startup user="))
        .count();
    // The replication connection, the slot monitor and two workers.
    assert!(opened >= 4, "{opened} connections:\n{trace}");
    assert_eq!(first.len(), opened, "a connection asked nothing:\n{trace}");
    for (conn, query) in &first {
        assert_eq!(*query, "SET transaction_timeout = 0", "{conn}:\n{trace}");
    }
}
