//! The chunk conversation, event by event, as a server answers it.

use super::*;
use crate::pgoutput::{RelationColumn, ReplicaIdentity};
use crate::wire::testing::pg_error;
use crate::wire::DataRow;

fn spec(limit: u64) -> TableSpec {
    let column = |name: &str, type_oid| RelationColumn {
        in_replica_identity: name == "id",
        name: name.into(),
        type_oid,
        type_modifier: -1,
    };
    TableSpec {
        relation: Relation {
            oid: 1,
            namespace: "public".into(),
            name: "users".into(),
            replica_identity: ReplicaIdentity::Default,
            columns: vec![column("name", 25), column("id", 23)],
        },
        heap: QualifiedName {
            schema: "public".into(),
            table: "users".into(),
        },
        key: vec![1],
        filter: None,
        limit,
    }
}

fn value(text: &str) -> Event {
    Event::DataRow(DataRow {
        columns: vec![Some(Bytes::copy_from_slice(text.as_bytes()))],
    })
}

fn done(tag: &str) -> Event {
    Event::CommandComplete { tag: tag.into() }
}

fn ready(transaction: TransactionStatus) -> Event {
    Event::QueryDone { transaction }
}

fn line(text: &str) -> Event {
    Event::CopyOutData(Bytes::copy_from_slice(text.as_bytes()))
}

/// Feeds events, expecting nothing back until the last.
fn feed(reader: &mut Reader, events: &[Event]) -> Result<Option<Chunk>, ReadError> {
    let (last, rest) = events.split_last().unwrap();
    for event in rest {
        assert_eq!(reader.on_event(event), Ok(None), "{event:?}");
    }
    reader.on_event(last)
}

/// The answer to a primary's chunk read: snapshot, COPY lines, committed-but-running xids.
fn primary_read(snapshot: &str, lines: &[&str], committed: &[&str]) -> Vec<Event> {
    let mut events = vec![done("BEGIN"), value(snapshot), done("SELECT 1")];
    events.extend(lines.iter().map(|l| line(l)));
    events.push(Event::CopyOutDone);
    events.push(done(&format!("COPY {}", lines.len())));
    events.extend(committed.iter().map(|x| value(x)));
    events.push(done("SELECT"));
    events.push(done("COMMIT"));
    events.push(ready(TransactionStatus::Idle));
    events
}

#[test]
fn a_primary_reads_a_chunk_then_writes_its_high_watermark_and_the_next_starts_after_it() {
    let mut reader = Reader::new(spec(2), Source::Primary { flush: true }, "r1", None);
    let read = reader.next_query().unwrap().unwrap();
    assert!(read.starts_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT pg_current_snapshot()::text; COPY ("), "{read}");
    assert!(read.ends_with("; COMMIT"), "{read}");
    assert!(
        read.contains("ORDER BY \"id\" LIMIT 2") || read.contains("ORDER BY id LIMIT 2"),
        "{read}"
    );
    assert!(
        !read.contains(" > "),
        "the first chunk starts at the table's start: {read}"
    );
    assert_eq!(reader.next_query(), Ok(None), "one query at a time");

    let answer = primary_read("748:752:748,750", &["ann\t1\n", "bob\t2\n"], &["750"]);
    assert_eq!(
        feed(&mut reader, &answer),
        Ok(None),
        "the watermark is still to write"
    );
    let mark = reader.next_query().unwrap().unwrap();
    assert_eq!(
        mark,
        "SELECT pg_logical_emit_message(false, 'slotline', 'chunk r1 0', true)::text"
    );
    let chunk = feed(
        &mut reader,
        &[
            value("0/1945500"),
            done("SELECT 1"),
            ready(TransactionStatus::Idle),
        ],
    )
    .unwrap()
    .unwrap();
    assert_eq!(chunk.number, 0);
    assert_eq!(chunk.after, None);
    assert!(!chunk.last);
    let keys: Vec<Vec<String>> = chunk.rows.iter().map(|(k, _)| key_text(k)).collect();
    assert_eq!(keys, vec![vec!["1".to_owned()], vec!["2".to_owned()]]);
    assert_eq!(chunk.rows[1].1, Bytes::from_static(b"bob\t2\n"));
    assert_eq!(
        chunk.judge,
        Judge::Snapshot {
            snapshot: TxSnapshot::parse("748:752:748,750").unwrap(),
            committed_in_progress: [750].into(),
            high: "0/1945500".parse().unwrap(),
            content: "chunk r1 0".into(),
        }
    );
    assert!(reader.idle());

    let next = reader.next_query().unwrap().unwrap();
    assert!(next.contains("> ('2')"), "{next}");
    let answer = primary_read("752:752:", &["cy\t3\n"], &[]);
    assert_eq!(feed(&mut reader, &answer), Ok(None));
    assert!(reader
        .next_query()
        .unwrap()
        .unwrap()
        .contains("'chunk r1 1'"));
    let chunk = feed(
        &mut reader,
        &[
            value("0/1945600"),
            done("SELECT 1"),
            ready(TransactionStatus::Idle),
        ],
    )
    .unwrap()
    .unwrap();
    assert!(chunk.last, "one row of two: the table ends here");
    assert_eq!(chunk.after, Some(vec!["2".to_owned()]));
    assert!(reader.finished());
    assert_eq!(reader.next_query(), Ok(None));
    assert_eq!((reader.rows_read, reader.chunks_read), (3, 2));

    // Read again from an earlier key (a chunk that did not become durable).
    reader.rewind(Some(vec!["2".into()]));
    assert!(reader.next_query().unwrap().unwrap().contains("> ('2')"));
}

#[test]
fn a_failed_read_is_rolled_back_and_read_again_from_the_same_key() {
    let mut reader = Reader::new(
        spec(10),
        Source::Primary { flush: false },
        "r1",
        Some(vec!["5".into()]),
    );
    let first = reader.next_query().unwrap().unwrap();
    let error = pg_error(
        "ERROR",
        "40001",
        "canceling statement due to conflict with recovery",
    );
    let outcome = feed(
        &mut reader,
        &[
            done("BEGIN"),
            value("1:1:"),
            done("SELECT 1"),
            Event::QueryError(Box::new(error.clone())),
            ready(TransactionStatus::Failed),
        ],
    );
    assert_eq!(outcome, Err(ReadError::Server(Box::new(error))));
    assert!(!reader.idle(), "the rollback is due");
    assert_eq!(reader.next_query(), Ok(Some("ROLLBACK".to_owned())));
    assert_eq!(reader.next_query(), Ok(None), "the rollback runs");
    assert_eq!(
        feed(
            &mut reader,
            &[done("ROLLBACK"), ready(TransactionStatus::Idle)]
        ),
        Ok(None)
    );
    assert_eq!(
        reader.next_query().unwrap().unwrap(),
        first,
        "the same chunk again"
    );
}

#[test]
fn answers_that_are_not_a_chunk_are_refused_without_a_chunk() {
    for (snapshot, lines, committed, why) in [
        ("not a snapshot", vec!["a\t1\n"], vec![], "xmin:xmax:xip"),
        ("1:2:", vec!["a\t\\N\n"], vec![], "without its key"),
        ("1:2:", vec!["a\n"], vec![], "does not parse"),
        ("1:2:", vec![], vec!["x1"], "not an xid"),
    ] {
        let mut reader = Reader::new(spec(10), Source::Primary { flush: false }, "r", None);
        reader.next_query().unwrap();
        let answer = primary_read(snapshot, &lines, &committed);
        match feed(&mut reader, &answer) {
            Err(ReadError::Answer(what)) => assert!(what.contains(why), "{what}"),
            other => panic!("{snapshot} {lines:?}: {other:?}"),
        }
        assert!(reader.idle(), "nothing to roll back: the transaction ended");
    }
}

#[test]
fn a_standby_reads_between_two_replay_positions_and_writes_no_watermark() {
    let mut reader = Reader::new(spec(10), Source::Standby, "r", None);
    let read = reader.next_query().unwrap().unwrap();
    assert!(
        read.starts_with("SELECT pg_last_wal_replay_lsn()::text; COPY ("),
        "{read}"
    );
    assert!(
        read.ends_with("; SELECT pg_last_wal_replay_lsn()::text"),
        "{read}"
    );
    let chunk = feed(
        &mut reader,
        &[
            value("0/176F640"),
            done("SELECT 1"),
            line("ann\t1\n"),
            Event::CopyOutDone,
            done("COPY 1"),
            value("0/176F7A8"),
            done("SELECT 1"),
            ready(TransactionStatus::Idle),
        ],
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        chunk.judge,
        Judge::Positions {
            before_read: "0/176F640".parse().unwrap(),
            after_read: "0/176F7A8".parse().unwrap(),
        }
    );
    assert!(chunk.last && reader.finished());
}
