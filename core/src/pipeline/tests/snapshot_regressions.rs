//! Behaviours of the snapshot and of retraction that end-to-end runs against a real
//! PostgreSQL showed were missing, each pinned here in the scripted harness.
use super::*;

fn user_rows(count: u32) -> Vec<Vec<Option<String>>> {
    (1..=count)
        .map(|i| vec![Some(i.to_string()), Some(format!("n{i}")), None])
        .collect()
}

#[test]
fn a_long_leftover_check_that_keeps_every_key_is_progress() {
    // A re-snapshot (slot present, no state file): Feldera holds the 40 keys PostgreSQL
    // still has, so every key is checked and nothing is deleted. Each question takes 100 ms;
    // the whole check takes 4 s, past NO_PROGRESS_TIMEOUT_SECS=1.
    let mut pg = pg();
    pg.slot_confirmed = Some(START);
    pg.tables = vec![
        users(ReplicaIdentity::Default).with_rows(user_rows(40), 1),
        items(),
    ];
    let mut s = Script::new(
        &[
            TABLES,
            ("SNAPSHOT_MODE", "initial"),
            ("SNAPSHOT_WORKERS", "1"),
            ("RETRACT_PAGE_ROWS", "1"),
            ("NO_PROGRESS_TIMEOUT_SECS", "1"),
        ],
        pg,
        SCHEMA,
    );
    let held: String = (1..=40)
        .map(|i| format!("{{\"insert\":{{\"id\":{i},\"name\":\"n{i}\"}}}}\n"))
        .collect();
    s.feldera.apply("users", &held);
    for _ in 0..2_000 {
        if s.exit().is_some() || s.pipeline().health().streaming {
            break;
        }
        s.advance(100);
        s.step();
    }
    let trace = s.take_trace();
    assert_eq!(
        s.exit(),
        None,
        "{}",
        trace.lines().rev().take(5).collect::<Vec<_>>().join("\n")
    );
    assert!(s.pipeline().health().streaming);
    assert_eq!(s.feldera.rows("users"), 40);
    assert!(
        trace.contains("users: scan ended: 40 keys read, 0 deletes sent, 40 kept"),
        "{trace}"
    );
}
