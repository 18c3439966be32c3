//! The online copy's whole algorithm against a real PostgreSQL, without the pipeline: a
//! table walked in chunks by `backfill::chunk::Reader` on one connection while a logical
//! replication stream runs on another, each chunk judged at its high watermark by
//! `backfill::window::Retained`, and a model of Feldera (key -> row) that takes the stream's
//! changes in stream order and the emitted chunk rows at their watermarks. At the end the
//! model must equal the table (docs/online-copy.md, "Reconciling a chunk with the stream").
//!
//! Keys and values are `int` and `text` only, whose text output does not depend on the
//! session settings (every connection here is a `Connection`, which pins them anyway).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use slotline_core::backfill::chunk::{Chunk, Judge, Reader, Source, TableSpec, WATERMARK_PREFIX};
use slotline_core::backfill::key::{touches, KeyColumns, RowKey};
use slotline_core::backfill::window::{ChunkRead, Retained, Touch, Verdict};
use slotline_core::catalog::questions::QualifiedName;
use slotline_core::conn::{ConnectionConfig, Encryption, Event};
use slotline_core::copy::CopyRow;
use slotline_core::pgoutput::{
    self, Datum, Message, Relation, RelationColumn, ReplicaIdentity, Tuple,
};
use slotline_core::time::PgTime;
use slotline_core::wire::StatusUpdate;
use slotline_core::Lsn;
use slotline_tests::driver::{rows, Driver};
use slotline_tests::pg::{wait_for, ClusterOptions, PgCluster};

/// A row as text columns (`None`: NULL), the form all three sides are compared in.
type Row = Vec<Option<String>>;
/// Feldera, as far as this test is concerned.
type Model = BTreeMap<RowKey, Row>;

fn config(database: &str, replication: bool, application_name: &str) -> ConnectionConfig {
    ConnectionConfig {
        user: "postgres".into(),
        database: database.into(),
        password: None,
        application_name: application_name.into(),
        replication,
        encryption: Encryption::Plain,
        keepalive: None,
    }
}

fn connect(pg: &PgCluster, db: &str, name: &str) -> Driver {
    connect_as(pg, db, name, "postgres")
}

fn connect_as(pg: &PgCluster, db: &str, name: &str, user: &str) -> Driver {
    let config = ConnectionConfig {
        user: user.into(),
        ..config(db, false, name)
    };
    Driver::connect(pg.port(), config)
        .unwrap_or_else(|e| panic!("connect {name} as {user}: {e}"))
        .0
}

/// Runs SQL on a driver, panicking on a server error; returns the rows.
fn exec(driver: &mut Driver, sql: &str) -> Vec<Row> {
    let events = driver.query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    if let Some(e) = events.iter().find_map(|e| match e {
        Event::QueryError(e) => Some(e),
        _ => None,
    }) {
        panic!("{sql}: {e}");
    }
    rows(&events)
}

fn one(driver: &mut Driver, sql: &str) -> String {
    exec(driver, sql)[0][0].clone().expect("a value")
}

fn int_key(id: &str) -> RowKey {
    RowKey(std::iter::once(id.as_bytes().to_vec()).collect())
}

/// The table `t (id int primary key, v text, n int)` as the chunk reader is told it.
fn spec(oid: u32, limit: u64, filter: Option<String>) -> TableSpec {
    let column = |name: &str, type_oid| RelationColumn {
        in_replica_identity: name == "id",
        name: name.into(),
        type_oid,
        type_modifier: -1,
    };
    TableSpec {
        relation: Relation {
            oid,
            namespace: "public".into(),
            name: "t".into(),
            replica_identity: ReplicaIdentity::Default,
            columns: vec![column("id", 23), column("v", 25), column("n", 23)],
        },
        heap: QualifiedName {
            schema: "public".into(),
            table: "t".into(),
        },
        key: vec![0],
        filter,
        limit,
    }
}

/// What the table holds now, read on `driver`.
fn table(driver: &mut Driver) -> Model {
    exec(driver, "SELECT id, v, n FROM t")
        .into_iter()
        .map(|row| (int_key(row[0].as_deref().unwrap()), row))
        .collect()
}

/// The first differences between a model and the table, for a failure message.
fn diff(model: &Model, table: &Model, limit: usize) -> Vec<String> {
    let keys: BTreeSet<&RowKey> = model.keys().chain(table.keys()).collect();
    keys.into_iter()
        .filter(|k| model.get(*k) != table.get(*k))
        .take(limit)
        .map(|k| {
            format!(
                "id {}: model {:?}, table {:?}",
                String::from_utf8_lossy(&k.0[0]),
                model.get(k),
                table.get(k)
            )
        })
        .collect()
}

fn mismatches(model: &Model, table: &Model) -> usize {
    let keys: BTreeSet<&RowKey> = model.keys().chain(table.keys()).collect();
    keys.into_iter()
        .filter(|k| model.get(*k) != table.get(*k))
        .count()
}

/// A COPY line as a row.
fn copy_row(line: &[u8], columns: usize) -> Row {
    let mut row = CopyRow::new();
    row.parse(line, columns).expect("a COPY row");
    row.fields()
        .map(|f| f.map(|b| String::from_utf8_lossy(b).into_owned()))
        .collect()
}

fn tuple_row(tuple: &Tuple<'_>) -> Row {
    tuple
        .iter()
        .map(|d| match d {
            Datum::Text(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Datum::Null => None,
            other => panic!("a column this test never sends: {other:?}"),
        })
        .collect()
}

/// Emits chunk rows into a model at their watermark.
fn emit(model: &mut Model, rows: &[(RowKey, bytes::Bytes)], columns: usize) {
    for (key, line) in rows {
        model.insert(key.clone(), copy_row(line, columns));
    }
}

/// A row change of `t`, as the model applies it.
#[derive(Clone, Debug)]
enum Change {
    Upsert {
        key: RowKey,
        row: Row,
        old_key: Option<RowKey>,
    },
    Delete {
        key: RowKey,
    },
}

fn apply(model: &mut Model, change: &Change) {
    match change {
        Change::Upsert { key, row, old_key } => {
            if let Some(old) = old_key {
                model.remove(old);
            }
            model.insert(key.clone(), row.clone());
        }
        Change::Delete { key } => {
            model.remove(key);
        }
    }
}

/// What the stream side hands its caller, in stream order.
#[derive(Debug)]
enum Item {
    Change(Change),
    /// A transaction ended: its xid, its Commit's `end_lsn`, what it touched of `t`.
    Commit {
        xid: u32,
        end: Lsn,
        touches: Vec<Touch<RowKey>>,
    },
    /// A logical message with the watermark prefix.
    Mark {
        content: String,
        lsn: Lsn,
    },
    Keepalive,
    Other,
}

/// The replication side: a pgoutput stream of publication `p`, decoded.
struct Stream {
    repl: Driver,
    /// `t`'s OID and key positions, from its Relation message.
    relation: Option<(u32, Vec<usize>)>,
    xid: Option<u32>,
    touches: Vec<Touch<RowKey>>,
    /// The last Commit's end: what the status updates report as flushed.
    flushed: Lsn,
    last_status: Instant,
    pub transactions: u64,
    pub changes: u64,
}

impl Stream {
    /// Creates slot `s` (no snapshot) and starts streaming it with messages.
    fn start(pg: &PgCluster, db: &str) -> (Stream, Lsn) {
        let (mut repl, _) = Driver::connect(pg.port(), config(db, true, "backfill-stream"))
            .expect("replication connection");
        let created = exec(
            &mut repl,
            "CREATE_REPLICATION_SLOT s LOGICAL pgoutput (SNAPSHOT 'nothing')",
        );
        let at: Lsn = created[0][1].as_deref().unwrap().parse().unwrap();
        repl.conn()
            .query(
                "START_REPLICATION SLOT s LOGICAL 0/0 \
                 (proto_version '1', publication_names 'p', messages 'true')",
            )
            .unwrap();
        repl.until(|e| matches!(e, Event::StreamStarted(_)))
            .expect("stream started");
        let stream = Stream {
            repl,
            relation: None,
            xid: None,
            touches: Vec::new(),
            flushed: at,
            last_status: Instant::now(),
            transactions: 0,
            changes: 0,
        };
        (stream, at)
    }

    fn status(&mut self, reply_requested: bool) {
        let flushed = self.flushed;
        self.repl
            .conn()
            .send_status_update(StatusUpdate {
                write: flushed,
                flush: flushed,
                apply: flushed,
                client_time: PgTime(0),
                reply_requested,
            })
            .expect("status update");
        self.repl.flush().expect("send status update");
        self.last_status = Instant::now();
    }

    /// The next item of the stream (blocks until the server sends something).
    fn next(&mut self) -> Item {
        if self.last_status.elapsed() > Duration::from_millis(500) {
            self.status(false);
        }
        let event = self.repl.next_event().expect("the stream");
        let data = match event {
            Event::XLogData(x) => x.data,
            Event::Keepalive(k) => {
                if k.reply_requested {
                    self.status(false);
                }
                return Item::Keepalive;
            }
            other => panic!("unexpected on the stream: {other:?}"),
        };
        let message = pgoutput::parse(&data).expect("a pgoutput message");
        match &message {
            Message::Begin(begin) => {
                self.xid = Some(begin.xid);
                self.touches.clear();
                Item::Other
            }
            Message::Commit(commit) => {
                self.transactions += 1;
                let xid = self.xid.take().expect("a Begin before the Commit");
                self.flushed = commit.end_lsn;
                Item::Commit {
                    xid,
                    end: commit.end_lsn,
                    touches: std::mem::take(&mut self.touches),
                }
            }
            Message::Relation(relation) => {
                assert_eq!(relation.name, "t", "only t is published");
                let positions = KeyColumns {
                    names: vec!["id".into()],
                }
                .positions(&relation.columns)
                .expect("t's key");
                self.relation = Some((relation.oid, positions));
                Item::Other
            }
            Message::Logical(m) if m.prefix == WATERMARK_PREFIX => Item::Mark {
                content: String::from_utf8(m.content.to_vec()).unwrap(),
                lsn: m.lsn,
            },
            Message::Insert(_) | Message::Update(_) | Message::Delete(_) => {
                self.changes += 1;
                let (_, positions) = self.relation.as_ref().expect("a Relation first");
                self.touches.extend(touches(&message, positions));
                // The model's keys, read off the tuples here (not through `touches`).
                let key_of = |tuple: &Tuple<'_>| match tuple.get(0) {
                    Some(Datum::Text(b)) => RowKey(std::iter::once(b.to_vec()).collect()),
                    other => panic!("a key column as {other:?}"),
                };
                Item::Change(match &message {
                    Message::Insert(i) => Change::Upsert {
                        key: key_of(&i.new),
                        row: tuple_row(&i.new),
                        old_key: None,
                    },
                    Message::Update(u) => Change::Upsert {
                        key: key_of(&u.new),
                        row: tuple_row(&u.new),
                        old_key: u.old.as_ref().map(|o| key_of(&o.tuple)),
                    },
                    Message::Delete(d) => Change::Delete {
                        key: key_of(&d.old.tuple),
                    },
                    _ => unreachable!(),
                })
            }
            _ => Item::Other,
        }
    }
}

/// Sends the reader's queries and feeds it its connection's events until it hands back a
/// chunk. `between`: called once the read's transaction is done and before the high
/// watermark is written (only on a primary).
fn read_chunk(reader: &mut Reader, conn: &mut Driver, mut between: impl FnMut()) -> Chunk {
    let mut marked = false;
    loop {
        let sql = reader
            .next_query()
            .expect("a chunk query")
            .expect("a query is due");
        if sql.contains("pg_logical_emit_message") && !marked {
            marked = true;
            between();
        }
        conn.conn().query(&sql).expect("send the chunk query");
        loop {
            let event = conn.next_event().expect("the chunk connection");
            let done = matches!(event, Event::QueryDone { .. });
            match reader.on_event(&event) {
                Ok(Some(chunk)) => return chunk,
                Ok(None) => {}
                Err(e) => panic!("chunk read failed: {e}"),
            }
            if done {
                break;
            }
        }
    }
}

fn judged(chunk: &Chunk) -> (ChunkRead<RowKey, bytes::Bytes>, String, Lsn) {
    let Judge::Snapshot {
        snapshot,
        committed_in_progress,
        content,
        high,
    } = &chunk.judge
    else {
        panic!("a primary's chunk is judged by its snapshot");
    };
    (
        ChunkRead {
            rows: chunk.rows.clone(),
            snapshot: snapshot.clone(),
            committed_in_progress: committed_in_progress.clone(),
        },
        content.clone(),
        *high,
    )
}

fn server_version_num(driver: &mut Driver) -> u32 {
    one(driver, "SHOW server_version_num").parse().unwrap()
}

/// A small xorshift generator: no dependency, reproducible from its seed.
struct Rng(u64);

impl Rng {
    fn step(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.step() % n
    }
}

#[derive(Debug, Default)]
struct WriterStats {
    transactions: u64,
    failed: u64,
    inserts: u64,
    updates: u64,
    key_changes: u64,
    deletes: u64,
    side_only: u64,
}

const ROWS: u64 = 30_000;

/// The concurrent writer: random inserts (new ids, ids past the table's end), updates, key
/// changes and deletes over the whole key range, 1-4 statements a transaction, plus some
/// transactions that touch only an unpublished table, until `stop` (and for `min` at least).
fn writer(
    pg_port: u16,
    db: String,
    stop: Arc<AtomicBool>,
    seed: u64,
    min: Duration,
) -> WriterStats {
    let (mut conn, _) =
        Driver::connect(pg_port, config(&db, false, "backfill-writer")).expect("writer");
    let mut rng = Rng(seed | 1);
    let mut stats = WriterStats::default();
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) || started.elapsed() < min {
        let tx = stats.transactions + stats.failed;
        let mut sql = String::from("BEGIN;");
        if rng.below(10) == 0 {
            sql.push_str(&format!(
                "INSERT INTO side VALUES ({tx}) ON CONFLICT DO NOTHING;"
            ));
            stats.side_only += 1;
        } else {
            for i in 0..1 + rng.below(4) {
                // Mostly the original range and just past its end, sometimes a moved row.
                let id = if rng.below(8) == 0 {
                    100_001 + rng.below(ROWS + 10_000)
                } else {
                    1 + rng.below(ROWS + 10_000)
                };
                match rng.below(10) {
                    0..=2 => {
                        let v = if rng.below(20) == 0 {
                            "NULL".to_owned()
                        } else {
                            format!("'i{tx}.{i}'")
                        };
                        sql.push_str(&format!(
                            "INSERT INTO t VALUES ({id}, {v}, 0) ON CONFLICT (id) DO NOTHING;"
                        ));
                        stats.inserts += 1;
                    }
                    3..=6 => {
                        sql.push_str(&format!(
                            "UPDATE t SET v = 'u{tx}.{i}', n = n + 1 WHERE id = {id};"
                        ));
                        stats.updates += 1;
                    }
                    7 => {
                        sql.push_str(&format!(
                            "UPDATE t SET id = id + 100000 WHERE id = {id} \
                             AND NOT EXISTS (SELECT 1 FROM t WHERE id = {id} + 100000);"
                        ));
                        stats.key_changes += 1;
                    }
                    _ => {
                        sql.push_str(&format!("DELETE FROM t WHERE id = {id};"));
                        stats.deletes += 1;
                    }
                }
            }
        }
        sql.push_str("COMMIT");
        let events = conn.query(&sql).expect("writer query");
        if events.iter().any(|e| matches!(e, Event::QueryError(_))) {
            stats.failed += 1;
        } else {
            stats.transactions += 1;
        }
    }
    conn.close().expect("writer close");
    stats
}

/// Sets the flag when dropped.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[derive(Debug, Default)]
struct WalkStats {
    chunks: u64,
    rows_read: u64,
    emitted: u64,
    dropped: u64,
    retries: u64,
    retry_xids: BTreeSet<u64>,
}

/// Reads the stream until the watermark `content`, applying changes to both models and
/// commits to `retained`.
fn to_mark(
    stream: &mut Stream,
    model: &mut Model,
    naive: &mut Model,
    retained: &mut Retained<RowKey>,
    content: &str,
    high: Option<Lsn>,
) {
    loop {
        match stream.next() {
            Item::Change(change) => {
                apply(model, &change);
                apply(naive, &change);
            }
            Item::Commit { xid, end, touches } => retained.on_commit(xid, end, touches),
            Item::Mark { content: c, lsn } if c == content => {
                if let Some(high) = high {
                    assert_eq!(lsn, high, "the mark is where the reader wrote it");
                }
                return;
            }
            _ => {}
        }
    }
}

/// Keeps reading the stream for `pause` (the walk's pace), asking for keepalives so a quiet
/// stream never blocks a read for long.
fn pump(
    stream: &mut Stream,
    model: &mut Model,
    naive: &mut Model,
    retained: &mut Retained<RowKey>,
    pause: Duration,
) {
    let deadline = Instant::now() + pause;
    while Instant::now() < deadline {
        stream.status(true);
        loop {
            match stream.next() {
                Item::Change(change) => {
                    apply(model, &change);
                    apply(naive, &change);
                }
                Item::Commit { xid, end, touches } => retained.on_commit(xid, end, touches),
                Item::Keepalive => break,
                _ => {}
            }
        }
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn an_online_copy_under_a_concurrent_writer_ends_equal() {
    let started = Instant::now();
    let pg = PgCluster::start();
    let db = pg.create_database("online_copy");
    pg.psql(
        &db,
        &format!(
            "CREATE TABLE t (id int PRIMARY KEY, v text, n int); \
             CREATE TABLE side (k bigint PRIMARY KEY); \
             INSERT INTO t SELECT g, 'v' || g, g % 7 FROM generate_series(1, {ROWS}) g; \
             CREATE PUBLICATION p FOR TABLE t"
        ),
    );
    pg.psql(&db, "VACUUM ANALYZE t");
    let oid: u32 = pg.psql(&db, "SELECT 't'::regclass::oid").parse().unwrap();
    // The slot after the rows: the stream does not carry them, only the copy can.
    let (mut stream, slot_at) = Stream::start(&pg, &db);
    let mut chunks = connect(&pg, &db, "backfill-chunks");
    let version = server_version_num(&mut chunks);
    let flush = version >= 170_000;

    let mut model = Model::new();
    // The same run with the rule switched off: every chunk row emitted at its watermark.
    let mut naive = Model::new();
    let mut retained: Retained<RowKey> = Retained::new();
    let columns = 3;

    let stop = Arc::new(AtomicBool::new(false));
    // A failing assertion stops the writer too (its thread ends when the cluster goes).
    let _stop_on_panic = StopOnDrop(stop.clone());
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let writer_thread = {
        let (port, db, stop) = (pg.port(), db.clone(), stop.clone());
        thread::spawn(move || writer(port, db, stop, seed, Duration::from_secs(3)))
    };

    // Let the writer get going, then walk.
    pump(
        &mut stream,
        &mut model,
        &mut naive,
        &mut retained,
        Duration::from_millis(300),
    );
    let walk_started = Instant::now();
    let mut reader = Reader::new(spec(oid, 1_000, None), Source::Primary { flush }, "w", None);
    let mut walk = WalkStats::default();
    while !reader.finished() {
        let chunk = read_chunk(&mut reader, &mut chunks, || {});
        let (read, content, high) = judged(&chunk);
        to_mark(
            &mut stream,
            &mut model,
            &mut naive,
            &mut retained,
            &content,
            Some(high),
        );
        emit(&mut naive, &chunk.rows, columns);
        walk.chunks += 1;
        walk.rows_read += chunk.rows.len() as u64;
        match retained.close_by_snapshot(read) {
            Verdict::Emit { rows, dropped } => {
                walk.emitted += rows.len() as u64;
                walk.dropped += dropped as u64;
                emit(&mut model, &rows, columns);
            }
            Verdict::Retry { xids } => {
                walk.retries += 1;
                walk.retry_xids.extend(xids);
                assert!(walk.retries < 200, "the walk keeps retrying: {walk:?}");
                reader.rewind(chunk.after.clone());
            }
        }
        pump(
            &mut stream,
            &mut model,
            &mut naive,
            &mut retained,
            Duration::from_millis(60),
        );
    }
    let walk_time = walk_started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let written = writer_thread.join().expect("the writer");

    // Everything written is in the WAL before this message; read the stream up to it.
    let end = one(
        &mut chunks,
        "SELECT pg_logical_emit_message(true, 'slotline', 'end')::text",
    );
    let end_lsn: Lsn = end.parse().unwrap();
    to_mark(
        &mut stream,
        &mut model,
        &mut naive,
        &mut retained,
        "end",
        Some(end_lsn),
    );
    let table_now = table(&mut chunks);
    let naive_stale = mismatches(&naive, &table_now);
    eprintln!(
        "PostgreSQL {version}: slot at {slot_at}, end mark {end}; walk {walk_time:?}, {walk:?}; \
         writer {written:?}; stream {} transactions, {} changes; table {} rows, model {} rows; \
         unfiltered emission: {naive_stale} keys stale",
        stream.transactions,
        stream.changes,
        table_now.len(),
        model.len()
    );
    assert!(
        model == table_now,
        "the model differs from the table at {} keys, first:\n{}",
        mismatches(&model, &table_now),
        diff(&model, &table_now, 20).join("\n")
    );
    assert!(walk.chunks >= ROWS / 1_000, "{walk:?}");
    assert!(
        written.transactions > 100 && walk_time > Duration::from_secs(1),
        "the writer ran beside the walk: {written:?}, walk {walk_time:?}"
    );

    // The machinery sees staleness: a key updated after a chunk's read and before its
    // watermark, in that order by construction. Emitted unfiltered the chunk leaves the
    // model stale; the rule leaves it equal.
    let mut other = connect(&pg, &db, "backfill-other");
    let mut reader = Reader::new(spec(oid, 1_000, None), Source::Primary { flush }, "d", None);
    let mut rule_model = model.clone();
    let mut unfiltered = model.clone();
    let mut retained: Retained<RowKey> = Retained::new();
    let mut updated = None;
    let chunk = read_chunk(&mut reader, &mut chunks, || {
        // The read's transaction is over: its rows and snapshot are taken.
        let rows = exec(
            &mut other,
            "UPDATE t SET v = 'after the read' WHERE id = (SELECT min(id) FROM t) \
             RETURNING id",
        );
        updated = rows[0][0].clone();
    });
    let updated = int_key(&updated.expect("a row updated"));
    assert!(
        chunk.rows.iter().any(|(k, _)| *k == updated),
        "the chunk holds the key updated after it"
    );
    let (read, content, high) = judged(&chunk);
    to_mark(
        &mut stream,
        &mut rule_model,
        &mut unfiltered,
        &mut retained,
        &content,
        Some(high),
    );
    emit(&mut unfiltered, &chunk.rows, columns);
    let Verdict::Emit { rows, dropped } = retained.close_by_snapshot(read) else {
        panic!("nothing to retry for");
    };
    assert_eq!(dropped, 1, "the updated key is dropped");
    assert!(rows.iter().all(|(k, _)| *k != updated));
    emit(&mut rule_model, &rows, columns);
    let table_now = table(&mut chunks);
    assert_eq!(
        diff(&unfiltered, &table_now, 5),
        [format!(
            "id {}: model {:?}, table {:?}",
            String::from_utf8_lossy(&updated.0[0]),
            unfiltered.get(&updated),
            table_now.get(&updated)
        )],
        "unfiltered, the chunk's older row overwrote the streamed update"
    );
    assert!(
        rule_model == table_now,
        "{}",
        diff(&rule_model, &table_now, 20).join("\n")
    );
    other.close().unwrap();
    chunks.close().unwrap();
    eprintln!("PostgreSQL {version}: test took {:?}", started.elapsed());
}

/// docs/online-copy-facts.md §3's race on a real server: a commit that waits for a
/// synchronous standby is in the WAL, and streamed, before a chunk read that cannot see it.
/// A copy that kept the commit drops its key; one that began after the stream delivered it
/// is told of it by the chunk's question (the writer's backend waits on `SyncRep`) and reads
/// the chunk again, when the chunk's role sees that wait (here a superuser). A plain
/// replication role does not: its chunk emits the older row (the gap docs/online-copy.md
/// names, asserted as it is).
#[test]
fn a_commit_visible_only_after_the_read_is_dropped_from_the_chunk() {
    let started = Instant::now();
    // No autovacuum: no xid is taken but the ones this test takes.
    let pg = PgCluster::start_with(ClusterOptions::default().setting("autovacuum", "off"));
    let db = pg.create_database("online_race");
    pg.psql(
        &db,
        "CREATE TABLE t (id int PRIMARY KEY, v text, n int); \
         INSERT INTO t SELECT g, 'old', g FROM generate_series(1, 20) g; \
         CREATE PUBLICATION p FOR TABLE t; \
         CREATE ROLE copier LOGIN REPLICATION; GRANT SELECT ON t TO copier",
    );
    let oid: u32 = pg.psql(&db, "SELECT 't'::regclass::oid").parse().unwrap();
    let (mut stream, _) = Stream::start(&pg, &db);
    let mut chunks = connect(&pg, &db, "backfill-chunks");
    let version = server_version_num(&mut chunks);
    let flush = version >= 170_000;
    let columns = 3;
    let mut model = Model::new();
    // The copy began before the commit: it keeps the stream's transactions from here.
    let mut before: Retained<RowKey> = Retained::new();

    pg.psql(
        "postgres",
        "ALTER SYSTEM SET synchronous_standby_names = 'nosuch'",
    );
    pg.psql("postgres", "SELECT pg_reload_conf()");
    let mut hung = connect(&pg, &db, "backfill-hung");
    let applied = wait_for(Duration::from_secs(10), || {
        (one(&mut hung, "SHOW synchronous_standby_names") == "nosuch").then_some(())
    });
    assert!(applied.is_some(), "the reload reached the new session");
    let pid = one(&mut hung, "SELECT pg_backend_pid()");
    exec(&mut hung, "SET synchronous_commit = on");
    let rows = exec(
        &mut hung,
        "BEGIN; UPDATE t SET v = 'new' WHERE id = 1; SELECT pg_current_xact_id()::text",
    );
    let xid: u64 = rows[0][0].as_deref().unwrap().parse().unwrap();
    // COMMIT, without waiting for its answer: it waits for the standby.
    hung.conn().query("COMMIT").unwrap();
    hung.flush().unwrap();
    let waiting = wait_for(Duration::from_secs(10), || {
        let rows = pg.query_rows(
            &db,
            &format!("SELECT wait_event FROM pg_stat_activity WHERE pid = {pid}"),
        );
        (rows[0][0].as_deref() == Some("SyncRep")).then_some(())
    });
    assert!(waiting.is_some(), "the commit waits for the standby");
    // A later transaction completes, so the chunk's snapshot lists the hung one as running
    // (rather than having it as its xmax).
    let later: u64 = pg
        .psql(
            &db,
            "SET synchronous_commit = local; SELECT pg_current_xact_id()",
        )
        .parse()
        .unwrap();
    assert!(later > xid);

    // The stream delivers the commit, before any chunk is read.
    let mut update_streamed = false;
    loop {
        match stream.next() {
            Item::Change(change) => {
                if let Change::Upsert { key, row, .. } = &change {
                    update_streamed |= *key == int_key("1") && row[1].as_deref() == Some("new");
                }
                apply(&mut model, &change);
            }
            Item::Commit {
                xid: x,
                end,
                touches,
            } => {
                before.on_commit(x, end, touches);
                if u64::from(x) == xid & 0xffff_ffff {
                    break;
                }
            }
            _ => {}
        }
    }
    assert!(
        update_streamed,
        "the stream carried the hung commit's update"
    );
    // A copy that began only after the stream delivered that commit.
    let mut after: Retained<RowKey> = Retained::new();

    // Read 1, while the commit still waits. The reader's read-only transaction takes no
    // xid and its watermark is not transactional: neither waits for the standby.
    let mut reader = Reader::new(spec(oid, 1_000, None), Source::Primary { flush }, "r", None);
    let read_started = Instant::now();
    let chunk = read_chunk(&mut reader, &mut chunks, || {});
    let read_time = read_started.elapsed();
    assert!(
        read_time < Duration::from_secs(5),
        "the reader was blocked: {read_time:?}"
    );
    let old_row = chunk
        .rows
        .iter()
        .find(|(k, _)| *k == int_key("1"))
        .map(|(_, line)| copy_row(line, columns))
        .expect("id 1 in the chunk");
    assert_eq!(
        old_row[1].as_deref(),
        Some("old"),
        "the read did not see 'new'"
    );
    let (read, content, high) = judged(&chunk);
    assert!(
        read.snapshot.xip.contains(&xid) && !read.snapshot.sees_full(xid),
        "the snapshot lists the hung transaction as running: {:?}",
        read.snapshot
    );
    // `pg_xact_status` says "in progress" while the transaction is in the proc array,
    // although its commit is in the commit log; its backend waits on `SyncRep` with its xid,
    // which a superuser sees: named as committed.
    assert_eq!(
        read.committed_in_progress,
        BTreeSet::from([xid]),
        "named while it waits"
    );
    // The same read by a plain replication role, which sees the writer's xid but not its
    // wait, while the commit still waits.
    let mut plain = connect_as(&pg, &db, "backfill-plain", "copier");
    let mut plain_reader =
        Reader::new(spec(oid, 1_000, None), Source::Primary { flush }, "p", None);
    let plain_chunk = read_chunk(&mut plain_reader, &mut plain, || {});
    let (plain_read, plain_content, plain_high) = judged(&plain_chunk);
    assert!(
        plain_read.snapshot.xip.contains(&xid),
        "{:?}",
        plain_read.snapshot
    );
    assert_eq!(
        plain_read.committed_in_progress,
        BTreeSet::new(),
        "without the privileges of pg_read_all_stats the wait is not seen"
    );
    // A copy that began, for the plain role, after the commit was streamed.
    let mut blind: Retained<RowKey> = Retained::new();
    for (mark, at) in [(&content, high), (&plain_content, plain_high)] {
        loop {
            match stream.next() {
                Item::Change(change) => apply(&mut model, &change),
                Item::Commit { xid, end, touches } => {
                    after.on_commit(xid, end, touches.clone());
                    blind.on_commit(xid, end, touches.clone());
                    before.on_commit(xid, end, touches);
                }
                Item::Mark { content: c, lsn } if c == *mark => {
                    assert_eq!(lsn, at, "the mark is where the reader wrote it");
                    break;
                }
                _ => {}
            }
        }
    }
    let Verdict::Emit { rows, dropped } = before.close_by_snapshot(read.clone()) else {
        panic!("the copy that kept the commit has nothing to retry for");
    };
    assert_eq!(dropped, 1, "id 1 is left to the stream");
    assert!(rows.iter().all(|(k, _)| *k != int_key("1")));
    assert_eq!(rows.len(), 19);
    emit(&mut model, &rows, columns);
    // The copy that began after the commit was streamed knows nothing of it, but the
    // question named it: its keys are unknown, the chunk is read again (once the commit is
    // visible, below) rather than emitting the older row over 'new'.
    assert_eq!(
        after.close_by_snapshot(read),
        Verdict::Retry { xids: vec![xid] },
        "a commit older than the copy, still waiting: read again"
    );
    // The plain role's copy: nothing names the commit, and the chunk's older row would
    // overwrite 'new' (docs/online-copy.md, what is left of the gap), here for as long as
    // the standby does not answer.
    let stale = blind.close_by_snapshot(plain_read);
    let emits_old = matches!(&stale, Verdict::Emit { rows, dropped: 0 }
        if rows.iter().any(|(k, line)| *k == int_key("1")
            && copy_row(line, columns)[1].as_deref() == Some("old")));
    assert!(emits_old, "{stale:?}");
    plain.close().unwrap();

    // Read 2: the wait ends while the chunk's transaction is open (its COPY waits on an
    // advisory lock, after its snapshot was taken), so the commit is named as committed but
    // running for that snapshot.
    let mut locker = connect(&pg, &db, "backfill-locker");
    exec(&mut locker, "SELECT pg_advisory_lock(4242)");
    let mut after2: Retained<RowKey> = Retained::new();
    let mut reader2 = Reader::new(
        spec(
            oid,
            1_000,
            Some("pg_advisory_xact_lock_shared(4242)::text = ''".into()),
        ),
        Source::Primary { flush },
        "r2",
        None,
    );
    start_read_held_by_the_lock(&pg, &db, &mut chunks, &mut reader2);
    pg.psql(&db, &format!("SELECT pg_cancel_backend({pid})"));
    let tail = hung
        .until(|e| matches!(e, Event::QueryDone { .. }))
        .unwrap();
    assert!(
        tail.iter()
            .any(|e| matches!(e, Event::Notice(n) if n.message.contains("synchronous"))),
        "{tail:?}"
    );
    assert_eq!(
        pg.psql(&db, &format!("SELECT pg_xact_status('{xid}')")),
        "committed"
    );
    exec(&mut locker, "SELECT pg_advisory_unlock(4242)");
    let chunk2 = loop {
        let event = chunks.next_event().unwrap();
        let done = matches!(event, Event::QueryDone { .. });
        if let Some(chunk) = reader2.on_event(&event).unwrap() {
            break chunk;
        }
        if done {
            break read_chunk(&mut reader2, &mut chunks, || {});
        }
    };
    let (read2, content2, high2) = judged(&chunk2);
    assert!(!read2.snapshot.sees_full(xid), "{:?}", read2.snapshot);
    assert_eq!(read2.committed_in_progress, BTreeSet::from([xid]));
    loop {
        match stream.next() {
            Item::Change(change) => apply(&mut model, &change),
            Item::Commit { xid, end, touches } => {
                after2.on_commit(xid, end, touches.clone());
                before.on_commit(xid, end, touches);
            }
            Item::Mark { content: c, lsn } if c == content2 => {
                assert_eq!(lsn, high2);
                break;
            }
            _ => {}
        }
    }
    assert_eq!(
        after2.close_by_snapshot(read2.clone()),
        Verdict::Retry { xids: vec![xid] },
        "a commit named committed, never seen by this copy: read again"
    );
    // The copy that kept the commit still drops id 1 from this read.
    let Verdict::Emit { rows, dropped } = before.close_by_snapshot(read2) else {
        panic!("the copy that kept the commit has nothing to retry for");
    };
    assert_eq!((rows.len(), dropped), (19, 1));
    emit(&mut model, &rows, columns);

    pg.psql("postgres", "ALTER SYSTEM RESET synchronous_standby_names");
    pg.psql("postgres", "SELECT pg_reload_conf()");

    // Read again, the retried chunk sees the commit and is emitted whole.
    reader2.rewind(chunk2.after.clone());
    let chunk3 = read_chunk(&mut reader2, &mut chunks, || {});
    let (read3, content3, high3) = judged(&chunk3);
    loop {
        match stream.next() {
            Item::Change(change) => apply(&mut model, &change),
            Item::Commit { xid, end, touches } => after2.on_commit(xid, end, touches),
            Item::Mark { content: c, lsn } if c == content3 => {
                assert_eq!(lsn, high3);
                break;
            }
            _ => {}
        }
    }
    let Verdict::Emit { rows, dropped } = after2.close_by_snapshot(read3) else {
        panic!("the commit is visible now");
    };
    assert_eq!((rows.len(), dropped), (20, 0));
    let new_row = rows
        .iter()
        .find(|(k, _)| *k == int_key("1"))
        .map(|(_, line)| copy_row(line, columns));
    assert_eq!(new_row.unwrap()[1].as_deref(), Some("new"));
    emit(&mut model, &rows, columns);

    let table_now = table(&mut chunks);
    assert_eq!(
        table_now[&int_key("1")][1].as_deref(),
        Some("new"),
        "committed"
    );
    assert!(
        model == table_now,
        "{}",
        diff(&model, &table_now, 20).join("\n")
    );
    hung.close().unwrap();
    locker.close().unwrap();
    chunks.close().unwrap();
    eprintln!(
        "PostgreSQL {version}: xid {xid}, later {later}, read 1 took {read_time:?}; test took {:?}",
        started.elapsed()
    );
}

/// A transaction that writes only tables outside the publication is not streamed at all
/// (pgoutput sends no Begin/Commit for a transaction without a published change, 15+). If
/// it began before the copy's first chunk, was running when a chunk's snapshot was taken
/// and commits during the read, the chunk names it as committed but running and the stream
/// never shows it: the rule cannot tell it from an older commit it missed, and the chunk is
/// read again (safe, a retry). One begun after the first chunk's snapshot cannot be an
/// older commit, and costs nothing.
#[test]
fn a_commit_outside_the_publication_during_a_read_costs_a_retry() {
    let pg = PgCluster::start_with(ClusterOptions::default().setting("autovacuum", "off"));
    let db = pg.create_database("online_side");
    pg.psql(
        &db,
        "CREATE TABLE t (id int PRIMARY KEY, v text, n int); CREATE TABLE side (k int); \
         INSERT INTO t SELECT g, 'old', g FROM generate_series(1, 20) g; \
         CREATE PUBLICATION p FOR TABLE t",
    );
    let oid: u32 = pg.psql(&db, "SELECT 't'::regclass::oid").parse().unwrap();
    let (mut stream, _) = Stream::start(&pg, &db);
    let mut chunks = connect(&pg, &db, "backfill-chunks");
    let version = server_version_num(&mut chunks);
    let mut retained: Retained<RowKey> = Retained::new();

    let mut side = connect(&pg, &db, "backfill-side");
    let xid: u64 = one(
        &mut side,
        "BEGIN; INSERT INTO side VALUES (1); SELECT pg_current_xact_id()::text",
    )
    .parse()
    .unwrap();
    pg.psql(&db, "SELECT pg_current_xact_id()"); // a later one completes: xid is in xip
    let mut locker = connect(&pg, &db, "backfill-locker");
    exec(&mut locker, "SELECT pg_advisory_lock(4242)");
    let mut reader = Reader::new(
        spec(
            oid,
            1_000,
            Some("pg_advisory_xact_lock_shared(4242)::text = ''".into()),
        ),
        Source::Primary {
            flush: version >= 170_000,
        },
        "s",
        None,
    );
    start_read_held_by_the_lock(&pg, &db, &mut chunks, &mut reader);
    exec(&mut side, "COMMIT");
    exec(&mut locker, "SELECT pg_advisory_unlock(4242)");
    let chunk = loop {
        let event = chunks.next_event().unwrap();
        let done = matches!(event, Event::QueryDone { .. });
        if let Some(chunk) = reader.on_event(&event).unwrap() {
            break chunk;
        }
        if done {
            break read_chunk(&mut reader, &mut chunks, || {});
        }
    };
    let (read, content, high) = judged(&chunk);
    assert!(read.snapshot.xip.contains(&xid), "{:?}", read.snapshot);
    assert_eq!(read.committed_in_progress, BTreeSet::from([xid]));
    let mut streamed = Vec::new();
    loop {
        match stream.next() {
            Item::Commit { xid, end, touches } => {
                streamed.push(xid);
                retained.on_commit(xid, end, touches);
            }
            Item::Mark { content: c, lsn } if c == content => {
                assert_eq!(lsn, high);
                break;
            }
            _ => {}
        }
    }
    assert_eq!(
        streamed,
        Vec::<u32>::new(),
        "the side transaction is not streamed"
    );
    assert_eq!(
        retained.close_by_snapshot(read),
        Verdict::Retry { xids: vec![xid] }
    );
    // Read again: the snapshot sees it now, and the chunk is emitted whole.
    reader.rewind(chunk.after.clone());
    let again = read_chunk(&mut reader, &mut chunks, || {});
    let (read, content, _) = judged(&again);
    let mut model = Model::new();
    let mut ignored = Model::new();
    to_mark(
        &mut stream,
        &mut model,
        &mut ignored,
        &mut retained,
        &content,
        None,
    );
    let Verdict::Emit { rows, dropped } = retained.close_by_snapshot(read) else {
        panic!("seen now");
    };
    assert_eq!((rows.len(), dropped), (20, 0));

    // A side transaction begun after the copy's first chunk (its xid at or above that
    // chunk's snapshot's xmax) and committed during a read does not stand in the way: had
    // it written the table, the stream would carry it.
    let later: u64 = one(
        &mut side,
        "BEGIN; INSERT INTO side VALUES (2); SELECT pg_current_xact_id()::text",
    )
    .parse()
    .unwrap();
    pg.psql(&db, "SELECT pg_current_xact_id()");
    exec(&mut locker, "SELECT pg_advisory_lock(4242)");
    reader.rewind(chunk.after.clone());
    start_read_held_by_the_lock(&pg, &db, &mut chunks, &mut reader);
    exec(&mut side, "COMMIT");
    exec(&mut locker, "SELECT pg_advisory_unlock(4242)");
    let third = loop {
        let event = chunks.next_event().unwrap();
        let done = matches!(event, Event::QueryDone { .. });
        if let Some(chunk) = reader.on_event(&event).unwrap() {
            break chunk;
        }
        if done {
            break read_chunk(&mut reader, &mut chunks, || {});
        }
    };
    let (read, content, _) = judged(&third);
    assert_eq!(read.committed_in_progress, BTreeSet::from([later]));
    to_mark(
        &mut stream,
        &mut model,
        &mut ignored,
        &mut retained,
        &content,
        None,
    );
    let Verdict::Emit { rows, dropped } = retained.close_by_snapshot(read) else {
        panic!("a transaction begun after the copy's first chunk is no reason to read again");
    };
    assert_eq!((rows.len(), dropped), (20, 0));
    side.close().unwrap();
    locker.close().unwrap();
    chunks.close().unwrap();
}

/// Sends the reader's chunk read on `chunks` and waits until its COPY waits on the advisory
/// lock its filter takes (after the chunk's snapshot was taken).
fn start_read_held_by_the_lock(pg: &PgCluster, db: &str, chunks: &mut Driver, reader: &mut Reader) {
    let sql = reader.next_query().unwrap().unwrap();
    chunks.conn().query(&sql).unwrap();
    chunks.flush().unwrap();
    let blocked = wait_for(Duration::from_secs(10), || {
        let rows = pg.query_rows(
            db,
            "SELECT count(*) FROM pg_stat_activity \
             WHERE application_name = 'backfill-chunks' AND wait_event = 'advisory'",
        );
        (rows[0][0].as_deref() == Some("1")).then_some(())
    });
    assert!(blocked.is_some(), "the chunk's COPY waits on the lock");
}
