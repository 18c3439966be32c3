//! A table's copy fed the stream message by message.

use super::*;
use crate::backfill::xid::TxSnapshot;
use crate::pgoutput::{
    Datum, Delete, Insert, OldKind, OldTuple, RelationColumn, ReplicaIdentity, Update,
};
use smallvec::smallvec;

fn relation(oid: u32, columns: &[&str]) -> Relation {
    Relation {
        oid,
        namespace: "public".into(),
        name: "users".into(),
        replica_identity: ReplicaIdentity::Default,
        columns: columns
            .iter()
            .map(|c| RelationColumn {
                in_replica_identity: *c == "id",
                name: (*c).into(),
                type_oid: 23,
                type_modifier: -1,
            })
            .collect(),
    }
}

fn key(id: &str) -> RowKey {
    RowKey(smallvec![id.as_bytes().to_vec()])
}

fn users_copy() -> TableCopy {
    let mut copy = TableCopy::new(KeyColumns {
        names: vec!["id".into()],
    });
    copy.on_relation(&relation(16400, &["id", "v"]));
    copy
}

fn insert(oid: u32, id: &'static str) -> Message<'static> {
    Message::Insert(Insert {
        relation_oid: oid,
        new: [Datum::Text(id.as_bytes()), Datum::Text(b"x")]
            .into_iter()
            .collect(),
    })
}

fn chunk(judge: Judge, ids: &[&str], last: bool) -> Chunk {
    Chunk {
        number: 3,
        after: Some(vec!["0".into()]),
        rows: ids
            .iter()
            .map(|id| (key(id), Bytes::from(format!("{id}\tv\n"))))
            .collect(),
        last,
        judge,
    }
}

fn on_primary(snapshot: &str, committed: &[u64]) -> Judge {
    Judge::Snapshot {
        snapshot: TxSnapshot::parse(snapshot).unwrap(),
        committed_in_progress: committed.iter().copied().collect(),
        high: Lsn(500),
        content: "chunk r 3".into(),
    }
}

fn watermark(content: &'static str, transactional: bool) -> LogicalMessage<'static> {
    LogicalMessage {
        transactional,
        lsn: Lsn(500),
        prefix: WATERMARK_PREFIX,
        content: content.as_bytes(),
    }
}

#[test]
fn a_primary_s_chunk_is_judged_at_its_own_watermark_only() {
    let mut copy = users_copy();
    // 750 updates id 2 after the chunk's snapshot; its commit streams before the watermark.
    assert_eq!(copy.on_begin(750, Lsn(400)), None);
    copy.on_change(&Message::Update(Update {
        relation_oid: 16400,
        old: None,
        new: [Datum::Text(b"2"), Datum::Text(b"new")]
            .into_iter()
            .collect(),
    }));
    assert_eq!(copy.on_commit(Lsn(410)), None);
    assert_eq!(
        copy.on_chunk(
            chunk(on_primary("750:751:750", &[750]), &["1", "2"], false),
            Lsn(410)
        ),
        None
    );
    assert_eq!(copy.waiting(), 1);
    let foreign = LogicalMessage {
        prefix: "someone-else",
        ..watermark("chunk r 3", false)
    };
    assert_eq!(copy.on_message(&foreign), None, "another prefix");
    assert_eq!(
        copy.on_message(&watermark("chunk r 2", false)),
        None,
        "another chunk"
    );
    assert_eq!(
        copy.on_message(&watermark("chunk r 3", true)),
        None,
        "a transactional message is nobody's watermark"
    );
    assert_eq!(
        copy.on_position(Lsn(9000)),
        None,
        "a primary's chunk waits for its message"
    );
    let emission = copy.on_message(&watermark("chunk r 3", false)).unwrap();
    assert_eq!(
        emission,
        Emission::Rows {
            number: 3,
            rows: vec![(key("1"), Bytes::from_static(b"1\tv\n"))],
            dropped: 1,
            at: Lsn(500),
            end_key: Some(vec!["2".into()]),
            last: false,
        }
    );
    assert_eq!(copy.waiting(), 0);
}

#[test]
fn changes_of_a_partition_are_keyed_by_its_own_columns_and_an_unkeyed_one_rereads() {
    let mut copy = users_copy();
    copy.on_relation(&relation(16500, &["v", "id"]));
    copy.on_begin(760, Lsn(400));
    copy.on_change(&Message::Insert(Insert {
        relation_oid: 16500,
        new: [Datum::Text(b"x"), Datum::Text(b"1")].into_iter().collect(),
    }));
    copy.on_change(&Message::Delete(Delete {
        relation_oid: 16400,
        old: OldTuple {
            kind: OldKind::Key,
            tuple: [Datum::Text(b"3"), Datum::Null].into_iter().collect(),
        },
    }));
    copy.on_commit(Lsn(410));
    copy.on_chunk(
        chunk(on_primary("760:761:760", &[]), &["1", "2", "3"], true),
        Lsn(410),
    );
    match copy.on_message(&watermark("chunk r 3", false)).unwrap() {
        Emission::Rows {
            rows,
            dropped,
            last,
            ..
        } => {
            assert_eq!(rows, vec![(key("2"), Bytes::from_static(b"2\tv\n"))]);
            assert_eq!(dropped, 2);
            assert!(last);
        }
        other => panic!("{other:?}"),
    }

    // A relation announced without the key column: its change's key is unknown.
    copy.on_relation(&relation(16600, &["v"]));
    copy.on_begin(770, Lsn(600));
    copy.on_change(&insert(16600, "z"));
    copy.on_commit(Lsn(610));
    copy.on_chunk(
        chunk(on_primary("770:771:770", &[]), &["4"], false),
        Lsn(610),
    );
    assert_eq!(
        copy.on_message(&watermark("chunk r 3", false)),
        Some(Emission::Reread {
            number: 3,
            after: Some(vec!["0".into()]),
            xids: vec![770],
        })
    );
}

#[test]
fn a_truncate_the_chunk_did_not_see_empties_it() {
    let mut copy = users_copy();
    copy.on_begin(780, Lsn(400));
    copy.on_truncate();
    copy.on_commit(Lsn(410));
    copy.on_chunk(
        chunk(on_primary("780:781:780", &[]), &["1"], false),
        Lsn(410),
    );
    assert!(matches!(
        copy.on_message(&watermark("chunk r 3", false)),
        Some(Emission::Rows { dropped: 1, ref rows, .. }) if rows.is_empty()
    ));
}

#[test]
fn a_standby_s_chunk_is_judged_once_the_stream_passes_the_read() {
    let positions = Judge::Positions {
        before_read: Lsn(100),
        after_read: Lsn(200),
    };
    // The stream is already past the read: judged at once.
    let mut copy = users_copy();
    assert!(matches!(
        copy.on_chunk(chunk(positions.clone(), &["1"], false), Lsn(250)),
        Some(Emission::Rows { at: Lsn(250), .. })
    ));

    // Behind it: a commit ending between the reads drops its key; the chunk goes before
    // the first transaction whose commit lies past the read.
    let mut copy = users_copy();
    assert_eq!(
        copy.on_chunk(chunk(positions.clone(), &["1", "2"], false), Lsn(90)),
        None
    );
    copy.on_begin(1, Lsn(140));
    copy.on_change(&insert(16400, "2"));
    assert_eq!(copy.on_commit(Lsn(150)), None);
    let emission = copy.on_begin(2, Lsn(230)).unwrap();
    assert!(
        matches!(
            emission,
            Emission::Rows {
                dropped: 1,
                at: Lsn(230),
                ..
            }
        ),
        "{emission:?}"
    );

    // An idle standby: a keepalive's position reaches it.
    let mut copy = users_copy();
    copy.on_chunk(chunk(positions, &["1"], false), Lsn(90));
    assert_eq!(copy.on_position(Lsn(199)), None);
    assert!(copy.on_position(Lsn(200)).is_some());
}
