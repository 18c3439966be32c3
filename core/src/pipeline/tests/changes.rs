//! What each change becomes on the wire to Feldera (the bodies of ingress requests).
use super::*;
use crate::pgoutput::OldKind;

fn bodies_after(s: &mut Script) -> String {
    let bodies = s.pending_bodies().join("");
    s.settle();
    bodies
}

#[test]
fn key_change_under_default_identity_retracts_the_old_key_then_inserts() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    s.wal(
        "tx: update users set id = 99 where id = 1",
        &[
            begin(0x2100, 700),
            update(
                0x2010,
                16384,
                Some((OldKind::Key, &[Some("1"), None, None])),
                &[Some("99"), Some("n2"), Some("small")],
            ),
            commit(0x20F8, 0x2100),
        ],
    );
    rule!(
        "A key-changing UPDATE under REPLICA IDENTITY DEFAULT deletes the old key (from the K tuple) before inserting the new row.",
        bodies_after(&mut s)
    );
}

#[test]
fn unchanged_toast_under_full_is_filled_from_the_old_row() {
    let mut s = Script::streaming(
        &[TABLES, ("BATCH_LINGER_MS", "0")],
        pg_with(ReplicaIdentity::Full, "60s"),
        SCHEMA,
    );
    s.wal(
        "Relation users (FULL)",
        &[relation(&users(ReplicaIdentity::Full))],
    );
    s.wal(
        "tx: update users set name = 'b' (bio is TOASTed, unchanged)",
        &[
            begin(0x2100, 700),
            update_with_hole(
                0x2010,
                16384,
                Some((OldKind::Row, &[Some("5"), Some("a"), Some("<200 KB>")])),
                &[Some("5"), Some("b"), None],
                2,
            ),
            commit(0x20F8, 0x2100),
        ],
    );
    rule!(
        "Under REPLICA IDENTITY FULL an unchanged TOASTed column is filled from the old row: a full insert.",
        bodies_after(&mut s)
    );
}

#[test]
fn unchanged_toast_under_default_is_a_partial_update_omitting_the_column() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    s.wal(
        "tx: update users set name = 'b' (bio is TOASTed, unchanged)",
        &[
            begin(0x2100, 700),
            update_with_hole(0x2010, 16384, None, &[Some("5"), Some("b"), None], 2),
            commit(0x20F8, 0x2100),
        ],
    );
    rule!(
        "Without the old row, an unchanged TOASTed column is omitted through Feldera's partial update, never sent as null.",
        bodies_after(&mut s)
    );
}

#[test]
fn relation_sent_again_mid_stream_with_an_added_column_is_used_from_then_on() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    let mut wider = users(ReplicaIdentity::Default);
    wider
        .relation
        .columns
        .push(crate::pgoutput::RelationColumn {
            in_replica_identity: false,
            name: "extra".into(),
            type_oid: 23,
            type_modifier: -1,
        });
    s.wal(
        "tx: ALTER TABLE users ADD COLUMN extra int; insert",
        &[
            begin(0x2100, 700),
            relation(&wider),
            insert(0x2010, 16384, &[Some("7"), Some("x"), None, Some("42")]),
            commit(0x20F8, 0x2100),
        ],
    );
    let body = bodies_after(&mut s);
    // A row of the old width after the new Relation is a protocol error, never an index panic.
    s.wal(
        "tx: insert with the old width",
        &[
            begin(0x2200, 701),
            insert(0x2110, 16384, &[Some("8"), Some("y"), None]),
        ],
    );
    rule!(
        "A Relation message sent again mid-stream (ADD COLUMN) replaces the cached shape; rows use the new columns from then on, and a row of the wrong width is a protocol error.",
        format!("{body}{}", s.take_trace())
    );
    assert_eq!(s.exit().map(|e| e.0), Some(1));
}

#[test]
fn two_routes_are_posted_separately_in_route_order() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    s.wal(
        "tx: insert items a; insert users 1",
        &[
            begin(0x2100, 700),
            relation(&items()),
            insert(0x2010, 16390, &[Some("a"), Some("3")]),
            insert(0x2020, 16384, &[Some("1"), None, None]),
            commit(0x20F8, 0x2100),
        ],
    );
    s.settle();
    rule!(
        "One transaction touching two routed tables becomes one batch posted as one request per Feldera table, in route order; completion is polled for each token.",
        s.take_trace()
    );
}

#[test]
fn a_bad_value_exits_1_without_acknowledging_its_transaction() {
    let mut s = streaming(&[("BATCH_LINGER_MS", "0")]);
    s.wal(
        "tx: insert users id='x'",
        &[
            begin(0x2100, 700),
            insert(0x2010, 16384, &[Some("x"), None, None]),
        ],
    );
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    assert_eq!(s.confirmed, START);
    rule!(
        "A value that cannot be delivered faithfully exits 1; nothing of its transaction is acknowledged.",
        s.take_trace()
    );
}
