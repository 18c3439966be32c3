//! Routes added to (or removed from) a running deployment, as the pipeline executes the
//! plan: only the added route is copied, under a temporary slot's exported snapshot; the
//! slot streamed from stays where it was; the stream skips the added route's transactions
//! committed before the temporary slot's consistent point, and a removed route's changes.
use super::snapshot::run_until_streaming;
use super::*;
use crate::snapshot::state::{RoutePhase, StateFile, StateRoute};
use crate::Lsn;

fn route(source: &str, target: &str, phase: Option<RoutePhase>) -> StateRoute {
    state_route(source, target, phase)
}

/// A complete copy of `routes` under the scripted slot, consistent at 0/1000.
fn copied(routes: Vec<StateRoute>) -> Vec<u8> {
    complete_state(routes).encode()
}

fn seeded() -> FakePg {
    let mut pg = pg();
    pg.tables = vec![
        users(ReplicaIdentity::Default)
            .with_rows(vec![vec![Some("1".into()), Some("a".into()), None]], 1),
        items().with_rows(
            (0..3)
                .map(|i| vec![Some(format!("sku{i}")), Some(i.to_string())])
                .collect(),
            1,
        ),
    ];
    pg
}

fn script(state: Vec<u8>, tables: &str) -> Script {
    script_with(seeded(), state, tables)
}

/// `pg` with items as a table the online copy cannot walk (REPLICA IDENTITY FULL): an
/// added items is copied under a temporary slot's exported snapshot, before the stream.
fn exported(mut pg: FakePg) -> FakePg {
    pg.tables[1].relation.replica_identity = ReplicaIdentity::Full;
    pg
}

fn script_with(mut pg: FakePg, state: Vec<u8>, tables: &str) -> Script {
    // The publication holds exactly the routed tables (startup checks that).
    pg.tables.truncate(tables.split(',').count());
    Script::with_state(
        &[
            ("TABLES", tables),
            ("SNAPSHOT_MODE", "initial"),
            ("SNAPSHOT_WORKERS", "1"),
        ],
        pg,
        SCHEMA,
        Some(state),
    )
}

/// A complete copy of users alone, items routed now: `tweak` sets up the fake servers
/// before the first answer.
fn items_added(pg: FakePg, tweak: impl FnOnce(&mut Script)) -> Script {
    let state = copied(vec![route("public.users", "users", None)]);
    Script::new_tweaked(
        &[
            ("TABLES", "users,public.items:lineitems"),
            ("SNAPSHOT_MODE", "initial"),
            ("SNAPSHOT_WORKERS", "1"),
        ],
        pg,
        SCHEMA,
        |s| {
            s.state_file = Some(state);
            tweak(s);
        },
    )
}

fn state_of(s: &Script) -> StateFile {
    StateFile::parse(s.state_file.as_deref().expect("a state file")).expect("it parses")
}

#[test]
fn an_added_route_is_copied_alone_and_its_earlier_transactions_are_skipped() {
    let mut s = script_with(
        exported(seeded()),
        copied(vec![route("public.users", "users", None)]),
        "users,public.items:lineitems",
    );
    run_until_streaming(&mut s);
    assert_eq!(s.exit(), None);
    assert_eq!(s.feldera.rows("users"), 0, "users is not copied again");
    assert_eq!(s.feldera.rows("lineitems"), 3);
    let file = state_of(&s);
    assert_eq!(
        file.consistent_point,
        Some(START),
        "the file's own copy stays"
    );
    assert_eq!(file.routes[1].phase, Some(RoutePhase::Complete));
    assert_eq!(file.routes[1].consistent_point, Some(Lsn(0x3000)));
    // Committed before the temporary slot's consistent point: items is in the copy, users
    // is the slot's to deliver. Committed at it: both are the slot's.
    s.wal(
        "tx 1 before the copy's point: insert users 7, items sku7",
        &[
            begin(0x2000, 1),
            relation(&users(ReplicaIdentity::Default)),
            insert(0x2008, 16384, &[Some("7"), Some("n"), None]),
            relation(&items()),
            insert(0x2010, 16390, &[Some("sku7"), Some("7")]),
            commit(0x2000, 0x2100),
        ],
    );
    s.wal(
        "tx 2 at the copy's point: insert items sku8",
        &[
            begin(0x3000, 2),
            insert(0x2F00, 16390, &[Some("sku8"), Some("8")]),
            commit(0x3000, 0x3100),
        ],
    );
    s.settle();
    s.advance(50);
    s.settle();
    assert_eq!(s.feldera.rows("users"), 1);
    assert_eq!(s.feldera.rows("lineitems"), 4, "sku7 is not sent, sku8 is");
    rule!(
        "A route added since the copy: the state file records it pending first, a temporary slot exporting a snapshot (0/3000) is created beside the slot streamed from, only items is copied (Feldera's lineitems counted empty first), the route is recorded complete at 0/3000, the temporary slot is dropped, and the stream starts from the slot's own position 0/1000. A transaction committed at 0/2000 delivers its users row and skips its items row (in the copy); one committed at 0/3000 delivers items.",
        s.take_trace()
    );
}

#[test]
fn a_removed_route_is_recorded_and_its_changes_still_in_the_slot_are_skipped() {
    let mut s = script(
        copied(vec![
            route("public.users", "users", None),
            route("public.items", "lineitems", None),
        ]),
        "users",
    );
    run_until_streaming(&mut s);
    assert_eq!(s.exit(), None);
    let file = state_of(&s);
    assert_eq!(file.routes[1].phase, Some(RoutePhase::Removed));
    s.wal(
        "tx 1 (committed before items left the publication): insert items sku9, users 9",
        &[
            begin(0x2000, 1),
            relation(&items()),
            insert(0x2008, 16390, &[Some("sku9"), Some("9")]),
            relation(&users(ReplicaIdentity::Default)),
            insert(0x2010, 16384, &[Some("9"), Some("n"), None]),
            commit(0x2000, 0x2100),
        ],
    );
    s.settle();
    s.advance(50);
    s.settle();
    assert_eq!(s.exit(), None);
    assert_eq!(s.feldera.rows("users"), 1);
    assert_eq!(s.feldera.rows("lineitems"), 0);
    rule!(
        "A route removed since the copy: the start warns that its Feldera table keeps its rows, records it removed, and streams from the slot without copying; a change of the removed table the slot still carries is skipped, the rest of its transaction is delivered.",
        s.take_trace()
    );
}

#[test]
fn an_added_route_s_old_shape_in_transactions_its_copy_holds_is_never_mapped() {
    let mut s = script_with(
        exported(seeded()),
        copied(vec![route("public.users", "users", None)]),
        "users,public.items:lineitems",
    );
    run_until_streaming(&mut s);
    assert_eq!(s.exit(), None);
    assert_eq!(s.feldera.rows("lineitems"), 3);
    s.take_trace();
    // Committed before the copy's point (0/3000), when items still named its key `code`:
    // that shape does not map onto lineitems, but its rows are in the copy.
    let old = FakeTable::new(
        16390,
        "items",
        ReplicaIdentity::Default,
        &[("code", 25, true), ("qty", 23, false)],
    );
    s.wal(
        "tx 1 before the copy's point: items in its old shape (code, qty), insert code7",
        &[
            begin(0x2000, 1),
            relation(&old),
            insert(0x2008, 16390, &[Some("code7"), Some("7")]),
            commit(0x2000, 0x2100),
        ],
    );
    s.settle();
    let exited = s.exit().cloned();
    assert_eq!(exited, None, "{}", s.take_trace());
    s.wal(
        "tx 2 after it: items as it is now, insert sku8",
        &[
            begin(0x3100, 2),
            relation(&items()),
            insert(0x3008, 16390, &[Some("sku8"), Some("8")]),
            commit(0x3100, 0x3200),
        ],
    );
    s.settle();
    s.advance(50);
    s.settle();
    assert_eq!(s.exit(), None);
    assert_eq!(s.feldera.rows("lineitems"), 4, "sku8 is sent, code7 is not");
    assert_eq!(s.confirmed, Lsn(0x3200));
    // The old shape in a transaction the copy does not hold is refused when a row uses it.
    s.wal(
        "tx 3 after it: items in the old shape again, insert code9",
        &[
            begin(0x3300, 3),
            relation(&old),
            insert(0x3208, 16390, &[Some("code9"), Some("9")]),
            commit(0x3300, 0x3400),
        ],
    );
    s.settle();
    let trace = s.take_trace();
    let (code, reason) = s.exit().cloned().unwrap_or_else(|| panic!("{trace}"));
    assert_eq!(code, 1, "{trace}");
    assert!(reason.contains("sku"), "{reason}");
    assert_eq!(s.confirmed, Lsn(0x3200));
}

#[test]
fn a_start_records_each_routed_table_s_oid_before_it_streams() {
    let mut s = script(copied(vec![route("public.users", "users", None)]), "users");
    run_until_streaming(&mut s);
    assert_eq!(s.exit(), None);
    let trace = s.take_trace();
    let written = trace
        .find("write state")
        .expect("the file is written again");
    let streaming = trace.find("START_REPLICATION").expect("it streams");
    assert!(written < streaming, "{trace}");
    assert_eq!(state_of(&s).routes[0].oid, Some(16384));
}

#[test]
fn a_table_created_under_a_removed_route_s_name_is_another_table() {
    let mut gone = route("public.items", "lineitems", Some(RoutePhase::Removed));
    gone.oid = Some(16390);
    let mut s = script(
        copied(vec![route("public.users", "users", None), gone]),
        "users",
    );
    run_until_streaming(&mut s);
    assert_eq!(s.exit(), None);
    s.take_trace();
    // The removed route's own table: skipped.
    s.wal(
        "tx 1: insert items sku9 (OID 16390), users 9",
        &[
            begin(0x2000, 1),
            relation(&items()),
            insert(0x2008, 16390, &[Some("sku9"), Some("9")]),
            relation(&users(ReplicaIdentity::Default)),
            insert(0x2010, 16384, &[Some("9"), Some("n"), None]),
            commit(0x2000, 0x2100),
        ],
    );
    s.settle();
    s.advance(50);
    s.settle();
    assert_eq!((s.exit(), s.feldera.rows("users")), (None, 1));
    assert!(s
        .take_trace()
        .contains("public.items (OID 16390) is a removed route's table"));
    // A table created since under the same name (another OID) is not the removed route's.
    let mut again = items();
    again.relation.oid = 17777;
    let replay = [
        begin(0x3000, 2),
        relation(&again),
        insert(0x2F00, 17777, &[Some("sku1"), Some("1")]),
        commit(0x3000, 0x3100),
    ];
    s.wal("tx 2: insert the new items sku1 (OID 17777)", &replay[..3]);
    s.advance(200);
    s.wal("tx 2 again (the replay)", &replay);
    s.settle();
    let trace = s.take_trace();
    let (code, reason) = s.exit().cloned().unwrap_or_else(|| panic!("{trace}"));
    assert_eq!(code, 1, "{trace}");
    assert!(reason.contains("public.items"), "{reason}");
    assert!(!trace.contains("is a removed route's table"), "{trace}");
    assert_eq!(s.confirmed, Lsn(0x2100), "nothing of tx 2 is acknowledged");
}

#[test]
fn with_checkpoints_an_added_route_is_recorded_complete_only_once_a_checkpoint_holds_it() {
    let mut s = items_added(seeded(), |s| s.set_fault_tolerance("at_least_once"));
    run_until_streaming(&mut s);
    // Copied online: its chunks are durable once a checkpoint (one a minute by default)
    // holds them.
    for _ in 0..120 {
        s.settle();
        if state_of(&s).routes[1].phase == Some(RoutePhase::Complete) {
            break;
        }
        s.advance(1000);
    }
    assert_eq!(s.exit(), None);
    let trace = s.take_trace();
    let checkpoint = trace.find("POST /checkpoint").expect("a checkpoint");
    let complete = trace
        .find("\"phase\": \"complete\"")
        .expect("the route recorded complete");
    assert!(
        checkpoint < complete,
        "the added route is recorded complete only after a checkpoint:\n{trace}"
    );
    assert_eq!(state_of(&s).routes[1].phase, Some(RoutePhase::Complete));
    assert_eq!(s.feldera.rows("lineitems"), 3);
}

#[test]
fn a_temporary_slot_still_held_by_an_earlier_connection_is_retried_not_fatal() {
    let mut pg = exported(seeded());
    pg.temporary_slot_taken = 1;
    let mut s = items_added(pg, |_| {});
    for _ in 0..400 {
        if s.exit().is_some() || s.pipeline().health().streaming {
            break;
        }
        s.settle();
        s.advance(50);
    }
    assert_eq!(s.exit(), None);
    assert!(s.pipeline().health().streaming);
    let trace = s.take_trace();
    assert!(
        trace.contains("already exists; the walsender of an earlier connection may still hold it"),
        "{trace}"
    );
    assert!(trace.contains("session 2 starting"), "{trace}");
    assert_eq!(state_of(&s).routes[1].phase, Some(RoutePhase::Complete));
    assert_eq!(s.feldera.rows("lineitems"), 3);
}

/// A complete copy of users alone, items routed now and copied online in chunks of
/// `chunk` rows; `tweak` sets up the fake servers before the first answer.
fn items_added_online(chunk: &'static str, tweak: impl FnOnce(&mut Script)) -> Script {
    let state = copied(vec![route("public.users", "users", None)]);
    Script::new_tweaked(
        &[
            ("TABLES", "users,public.items:lineitems"),
            ("SNAPSHOT_MODE", "initial"),
            ("COPY_CHUNK_ROWS", chunk),
        ],
        seeded(),
        SCHEMA,
        |s| {
            s.state_file = Some(state);
            tweak(s);
        },
    )
}

/// The stream carries the oldest watermark held back; the others stay held.
fn release_first_watermark(s: &mut Script) {
    let mut rest = s.online.held.split_off(1);
    s.release_watermarks();
    rest.append(&mut s.online.held);
    s.online.held = rest;
}

/// Settles the script in steps of 10 ms until `done` holds (at most 5 s).
fn settle_until(s: &mut Script, done: impl Fn(&Script) -> bool) {
    for _ in 0..500 {
        s.settle();
        if done(s) || s.exit().is_some() {
            return;
        }
        s.advance(10);
    }
}

fn qty_of(s: &Script, table: &str, sku: &str) -> Option<String> {
    s.feldera
        .contents(table)
        .into_iter()
        .find(|row| row["sku"] == sku)
        .map(|row| row["qty"].to_string())
}

#[test]
fn an_added_route_is_copied_online_beside_the_stream_and_a_newer_streamed_value_wins() {
    let mut s = items_added_online("2", |s| {
        // Transaction 7 runs while the chunks are read: their snapshots do not see it.
        s.online.snapshot = "7:8:7".into();
        s.online.hold = true;
    });
    run_until_streaming(&mut s);
    settle_until(&mut s, |s| !s.online.held.is_empty());
    assert_eq!(s.exit(), None);
    assert_eq!(
        s.online.held.len(),
        2,
        "chunks 0 and 1 read (the second while the first waits), their watermarks written"
    );
    // While the chunks wait for their watermarks, the stream delivers users at once, and
    // transaction 7 (which the chunks did not see) changes sku1.
    s.wal(
        "tx 7: insert users 7, update items sku1 to 99",
        &[
            begin(0x4000, 7),
            relation(&users(ReplicaIdentity::Default)),
            insert(0x3E08, 16384, &[Some("7"), Some("n"), None]),
            relation(&items()),
            update(0x3E10, 16390, None, &[Some("sku1"), Some("99")]),
            commit(0x4000, 0x4100),
        ],
    );
    settle_until(&mut s, |s| s.feldera.rows("users") == 1);
    assert_eq!(
        s.feldera.rows("users"),
        1,
        "users is not held back by the copy"
    );
    assert_eq!(qty_of(&s, "lineitems", "sku1").as_deref(), Some("99"));
    assert_eq!(
        qty_of(&s, "lineitems", "sku0"),
        None,
        "chunk 0 waits for its watermark"
    );
    s.release_watermarks();
    settle_until(&mut s, |s| {
        state_of(s).routes[1].phase == Some(RoutePhase::Complete)
    });
    assert_eq!(qty_of(&s, "lineitems", "sku0").as_deref(), Some("0"));
    assert_eq!(
        qty_of(&s, "lineitems", "sku1").as_deref(),
        Some("99"),
        "the chunk's older sku1 is dropped: the stream's newer value stays"
    );
    assert_eq!(s.exit(), None);
    assert_eq!(s.feldera.rows("lineitems"), 3);
    assert_eq!(qty_of(&s, "lineitems", "sku2").as_deref(), Some("2"));
    let file = state_of(&s);
    assert_eq!(file.routes[1].phase, Some(RoutePhase::Complete));
    assert_eq!(file.routes[1].consistent_point, Some(START));
    assert_eq!(file.routes[1].copied_through, None);
    rule!(
        "A route added since the copy whose table has a key, a Feldera table with a primary key that is empty: the stream starts at once (with logical messages), items is read on a connection of its own in chunks of 2 rows, each in a short transaction under its own snapshot and followed by a watermark message, the second read while the first waits for its watermark. Users' transaction is delivered while the chunks wait; it also changes sku1, which chunk 0's snapshot did not see, so at the watermark sku1 is dropped from the chunk (the streamed 99 stays) and sku0 is emitted as a transaction at the watermark, then the last chunk (sku2) at its own. Once durable, the state file records the copy through sku1, then the route complete from the slot's position.",
        s.take_trace()
    );
}

#[test]
fn a_chunk_whose_watermark_the_stream_passed_first_is_judged_where_the_stream_stands() {
    // The fake server's stream carries each watermark before the chunk's answer is read
    // (`FakeOnline::hold` off): the stream passes the watermark first.
    let mut s = items_added_online("2", |_| {});
    run_until_streaming(&mut s);
    s.wal(
        "tx 8: update items sku2 to 42",
        &[
            begin(0x6000, 8),
            relation(&items()),
            update(0x5F10, 16390, None, &[Some("sku2"), Some("42")]),
            commit(0x6000, 0x6100),
        ],
    );
    settle_until(&mut s, |s| {
        state_of(s).routes[1].phase == Some(RoutePhase::Complete)
    });
    assert_eq!(s.exit(), None);
    let trace = s.take_trace();
    assert!(
        trace.contains("the stream passed the chunk's watermark before its answer came"),
        "{trace}"
    );
    assert_eq!(s.feldera.rows("lineitems"), 3);
    assert_eq!(
        qty_of(&s, "lineitems", "sku2").as_deref(),
        Some("42"),
        "tx 8 streamed after every chunk was emitted: its value ends last"
    );
}

#[test]
fn an_interrupted_online_copy_goes_on_after_the_key_the_state_file_records() {
    let mut items = route("public.items", "lineitems", Some(RoutePhase::Pending));
    items.copied_through = Some(vec!["sku0".into()]);
    let state = copied(vec![route("public.users", "users", None), items]);
    let mut s = Script::new_tweaked(
        &[
            ("TABLES", "users,public.items:lineitems"),
            ("SNAPSHOT_MODE", "initial"),
            ("COPY_CHUNK_ROWS", "10"),
        ],
        seeded(),
        SCHEMA,
        |s| s.state_file = Some(state),
    );
    run_until_streaming(&mut s);
    settle_until(&mut s, |s| {
        state_of(s).routes[1].phase == Some(RoutePhase::Complete)
    });
    assert_eq!(s.exit(), None);
    let trace = s.take_trace();
    assert!(
        !trace.contains("COUNT(*)"),
        "an online copy the file records is not counted:\n{trace}"
    );
    assert!(!trace.contains("TEMPORARY"), "{trace}");
    assert!(
        trace.contains(r#"WHERE ("sku") > ('sku0') ORDER BY "sku""#),
        "the copy goes on after sku0:\n{trace}"
    );
    assert_eq!(s.feldera.rows("lineitems"), 2, "sku1 and sku2 only");
}

#[test]
fn an_online_copy_whose_role_cannot_see_synchronous_waits_says_so() {
    let mut s = items_added_online("10", |s| {
        s.online.sees_waits = false;
        s.online.synchronous_standby_names = "standby1".into();
    });
    run_until_streaming(&mut s);
    settle_until(&mut s, |s| {
        state_of(s).routes[1].phase == Some(RoutePhase::Complete)
    });
    assert_eq!(s.exit(), None);
    let trace = s.take_trace();
    assert!(
        trace.contains("cannot see other roles' waits")
            && trace.contains("GRANT pg_read_all_stats"),
        "{trace}"
    );
    assert_eq!(s.feldera.rows("lineitems"), 3);
}

#[test]
fn a_stop_during_an_online_copy_keeps_what_is_durable_and_the_restart_goes_on_from_it() {
    let mut s = items_added_online("1", |s| s.online.hold = true);
    run_until_streaming(&mut s);
    settle_until(&mut s, |s| !s.online.held.is_empty());
    release_first_watermark(&mut s);
    // Chunk 0 (sku0) is emitted and recorded; chunk 1 (sku1) waits for its watermark.
    settle_until(&mut s, |s| {
        state_of(s).routes[1].copied_through == Some(vec!["sku0".to_owned()])
            && !s.online.held.is_empty()
    });
    assert_eq!(s.feldera.rows("lineitems"), 1);
    s.shutdown();
    settle_until(&mut s, |s| s.exit().is_some());
    assert_eq!(s.exit().map(|(code, _)| *code), Some(0), "a graceful stop");
    let file = state_of(&s);
    assert_eq!(file.routes[1].phase, Some(RoutePhase::Pending));
    assert_eq!(file.routes[1].copied_through, Some(vec!["sku0".to_owned()]));
    assert_eq!(
        s.feldera.rows("lineitems"),
        1,
        "the waiting chunk is not sent"
    );
    let trace = s.take_trace();
    assert!(
        trace.contains("pg#2 close") || trace.contains("pg#2 terminate"),
        "{trace}"
    );
}

#[test]
fn the_progress_line_says_how_far_an_online_copy_is() {
    let state = copied(vec![route("public.users", "users", None)]);
    let mut s = Script::new_tweaked(
        &[
            ("TABLES", "users,public.items:lineitems"),
            ("SNAPSHOT_MODE", "initial"),
            ("COPY_CHUNK_ROWS", "2"),
            ("PROGRESS_INTERVAL_SECS", "5"),
        ],
        seeded(),
        SCHEMA,
        |s| {
            s.state_file = Some(state);
            s.online.hold = true;
        },
    );
    run_until_streaming(&mut s);
    settle_until(&mut s, |s| !s.online.held.is_empty());
    s.take_trace();
    for _ in 0..6 {
        s.advance(1000);
        s.settle();
    }
    let trace = s.take_trace();
    assert!(
        trace.contains("copying public.items online: 3 rows read in 2 chunk(s) (0 emitted, 0 left to the stream, 0 read again)"),
        "{trace}"
    );
}

#[test]
fn a_chunk_read_again_waits_longer_each_time_and_is_emitted_once_nothing_stands_in_its_way() {
    // Transaction 50 is named committed but running by every read, and the stream never
    // carries it (an older commit the record lacks): each read is followed by another,
    // after 20 ms, 40 ms, 80 ms, ...
    let mut s = items_added_online("10", |s| {
        s.online.snapshot = "50:100:50".into();
        s.online.committed = vec![50];
    });
    run_until_streaming(&mut s);
    s.take_trace();
    for _ in 0..32 {
        s.settle();
        s.advance(10);
    }
    let trace = s.take_trace();
    let reads = trace
        .matches("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .count();
    assert!(
        (3..=6).contains(&reads),
        "in 320 ms, reads at about 0, 20, 60, 140 and 300 ms: {reads}\n{trace}"
    );
    assert_eq!(s.feldera.rows("lineitems"), 0);
    // 50 is visible now: the next read is emitted.
    s.online.snapshot = "100:100:".into();
    s.online.committed.clear();
    settle_until(&mut s, |s| {
        state_of(s).routes[1].phase == Some(RoutePhase::Complete)
    });
    assert_eq!(s.feldera.rows("lineitems"), 3);
}

#[test]
fn a_chunk_read_again_takes_the_chunk_read_ahead_of_it_along() {
    // Every read names transaction 50 committed but running (never streamed) until it is
    // visible: chunk 0 is read again, and chunk 1, read while chunk 0 waited, is dropped
    // and read again after it.
    let mut s = items_added_online("1", |s| {
        s.online.snapshot = "50:100:50".into();
        s.online.committed = vec![50];
        s.online.hold = true;
    });
    run_until_streaming(&mut s);
    settle_until(&mut s, |s| s.online.held.len() == 2);
    assert_eq!(s.online.held.len(), 2, "chunk 0 and the one read ahead");
    s.online.snapshot = "100:100:".into();
    s.online.committed.clear();
    s.online.hold = false;
    s.release_watermarks();
    settle_until(&mut s, |s| {
        state_of(s).routes[1].phase == Some(RoutePhase::Complete)
    });
    assert_eq!(s.exit(), None);
    let trace = s.take_trace();
    assert!(
        trace.contains("chunk 0 of route 1 is read again"),
        "{trace}"
    );
    assert_eq!(
        trace.matches(r#"WHERE ("sku") > ('sku0')"#).count(),
        2,
        "chunk 1 is read twice: ahead of chunk 0, and again after it\n{trace}"
    );
    assert_eq!(s.feldera.rows("lineitems"), 3);
    for (sku, qty) in [("sku0", "0"), ("sku1", "1"), ("sku2", "2")] {
        assert_eq!(qty_of(&s, "lineitems", sku).as_deref(), Some(qty));
    }
}
