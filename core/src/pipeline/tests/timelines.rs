//! A server on another timeline than the one slotline sent from (a standby promoted, a
//! restore to an earlier point): the plan compares where that timeline branched off with
//! how far what Feldera holds may reach (docs/snapshot.md, "A timeline that forked").
use super::snapshot::run_until_streaming;
use super::*;
use crate::snapshot::state::{Delivered, StateFile};
use crate::Lsn;

/// A complete copy of users under the scripted slot, consistent at 0/1000, that records
/// `delivered`.
fn copied(delivered: Option<Delivered>) -> Vec<u8> {
    let mut file = complete_state(vec![state_route("public.users", "users", None)]);
    file.delivered = delivered;
    file.encode()
}

/// PostgreSQL holds users 1 and 2; the state file says they were copied.
fn script(state: Vec<u8>) -> Script {
    script_on(state, 1, None)
}

/// `script` with the server on `timeline`, whose history file says `history`.
fn script_on(state: Vec<u8>, timeline: u32, history: Option<&str>) -> Script {
    let mut pg = pg();
    pg.timeline = timeline;
    pg.timeline_history = history.map(str::to_owned);
    pg.tables = vec![users(ReplicaIdentity::Default).with_rows(
        vec![
            vec![Some("1".into()), Some("a".into()), None],
            vec![Some("2".into()), Some("b".into()), None],
        ],
        1,
    )];
    Script::with_state(
        &[
            ("TABLES", "users"),
            ("SNAPSHOT_MODE", "initial"),
            ("SNAPSHOT_WORKERS", "1"),
            ("BATCH_LINGER_MS", "0"),
        ],
        pg,
        SCHEMA,
        Some(state),
    )
}

fn recorded(s: &Script) -> Option<Delivered> {
    let file = StateFile::parse(s.state_file.as_deref().expect("a state file")).expect("parses");
    file.delivered
}

/// Feldera holds users 1 and 2 (as if copied), then tx 700 inserts user 9 at 0/2100 and
/// it is acknowledged.
fn streamed_user_9() -> Script {
    let mut s = script(copied(None));
    s.feldera.apply(
        "users",
        "{\"insert\":{\"id\":1,\"name\":\"a\"}}\n{\"insert\":{\"id\":2,\"name\":\"b\"}}\n",
    );
    run_until_streaming(&mut s);
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    insert_tx(&mut s, 700, 0x2100, &["9"]);
    s.settle();
    s.advance(11_000);
    assert_eq!(s.confirmed, Lsn(0x2100));
    assert_eq!(s.feldera.rows("users"), 3);
    s
}

#[test]
fn the_bound_is_recorded_before_a_batch_past_it_is_sent() {
    let mut s = streamed_user_9();
    let bound = recorded(&s).expect("a bound is recorded");
    assert_eq!(bound.timeline, 1);
    assert!(bound.through >= Lsn(0x2100), "{bound:?}");
    let trace = s.take_trace();
    let written = trace
        .find("wait until the state file records")
        .expect("the bound is written");
    let posted = trace.find("POST").expect("the batch is sent");
    assert!(written < posted, "{trace}");
    rule!(
        "A state file without a bound (written before slotline recorded one): tx 700's rows (its commit record at 0/20F8, ending 0/2100) wait until the state file records that Feldera may hold WAL up to 4 MiB past that, of timeline 1; only then is the batch posted.",
        trace
    );
}

#[test]
fn a_promotion_that_forked_behind_what_was_sent_copies_again_and_retracts_the_ghost() {
    let mut s = streamed_user_9();
    s.take_trace();
    // The standby never received tx 700: it was promoted at 0/2000.
    s.switch_timeline(2, Some("1\t0/2000\tno recovery target specified\n"));
    s.disconnect();
    s.advance(1_000);
    run_until_streaming(&mut s);
    assert_eq!(s.exit(), None, "the process goes on");
    assert_eq!(
        s.feldera.rows("users"),
        2,
        "user 9, which the new timeline never had, is retracted"
    );
    let bound = recorded(&s).expect("a bound");
    assert_eq!(
        bound.timeline, 2,
        "the copy is recorded on the new timeline"
    );
    rule!(
        "Tx 700 (user 9, 0/2100) was sent and acknowledged on timeline 1; the server comes back on timeline 2, which left timeline 1 at 0/2000, before it. The next session's plan names the fork, drops the slot, copies users again and retracts user 9: Feldera holds what the new timeline holds, and the process never exits.",
        s.take_trace()
    );
}

#[test]
fn a_promotion_after_everything_sent_streams_on() {
    let mut s = streamed_user_9();
    s.take_trace();
    s.switch_timeline(2, Some("1\t0/3000\tno recovery target specified\n"));
    s.disconnect();
    s.advance(1_000);
    run_until_streaming(&mut s);
    let trace = s.take_trace();
    assert!(!trace.contains("CREATE_REPLICATION_SLOT"), "{trace}");
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    insert_tx(&mut s, 701, 0x3200, &["10"]);
    s.settle();
    assert_eq!(s.feldera.rows("users"), 4);
    let bound = recorded(&s).expect("a bound");
    assert_eq!(bound.timeline, 2, "{bound:?}");
    rule!(
        "Timeline 2 left timeline 1 at 0/3000, after everything sent (up to 0/2100): the same history, so the session streams from the slot without copying, and the bound is recorded again on timeline 2 before the next batch.",
        trace + &s.take_trace()
    );
}

#[test]
fn after_a_restart_the_recorded_bound_decides_and_an_unreadable_history_is_a_fork() {
    let first = streamed_user_9();
    let state = first.state_file.clone().expect("a state file");
    // A new process: only the file knows what the earlier one sent.
    let mut s = script_on(state, 3, None);
    s.feldera.apply(
        "users",
        "{\"insert\":{\"id\":1,\"name\":\"a\"}}\n{\"insert\":{\"id\":9,\"name\":\"n\"}}\n",
    );
    run_until_streaming(&mut s);
    assert_eq!(s.exit(), None);
    assert_eq!(s.feldera.rows("users"), 2);
    rule!(
        "A new process finds the server on timeline 3 and cannot read its history; the state file says an earlier process sent from timeline 1 (up to 4 MiB past tx 700's commit at 0/20F8). Without the switch point the change of timeline counts as a fork: the slot is dropped, users copied again, user 9 retracted.",
        s.take_trace()
    );
}
