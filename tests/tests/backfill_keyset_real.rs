//! The online copy's chunk SQL (`backfill::keyset`) on a real PostgreSQL: the statements are
//! valid, a keyset walk in chunks copies exactly what one ordered COPY of the table copies
//! (composite keys, row filters, every key type it is meant for), the chunk query is an
//! index scan, a watermark answers an LSN, and a chunk's snapshot is its transaction's.

use slotline_core::backfill::keyset::{
    chunk_begin, chunk_copy, committed_but_running_query, reads_every_wait_query, snapshot_query,
    watermark,
};
use slotline_core::catalog::questions::{
    parse_published_tables, published_tables_query, QualifiedName, Row,
};
use slotline_core::pgoutput::{Relation, RelationColumn, ReplicaIdentity};
use slotline_core::Lsn;
use slotline_tests::pg::{find_pg_bin, wait_for, ClusterOptions, PgCluster};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

fn relation(table: &str, columns: &[&str]) -> Relation {
    Relation {
        oid: 1,
        namespace: "public".into(),
        name: table.into(),
        replica_identity: ReplicaIdentity::Default,
        columns: columns
            .iter()
            .map(|c| RelationColumn {
                in_replica_identity: false,
                name: (*c).into(),
                type_oid: 25,
                type_modifier: -1,
            })
            .collect(),
    }
}

fn public(table: &str) -> QualifiedName {
    QualifiedName {
        schema: "public".into(),
        table: table.into(),
    }
}

fn server_version_num(pg: &PgCluster, db: &str) -> u32 {
    let rows = pg.query_rows(db, "SHOW server_version_num");
    rows[0][0].as_deref().unwrap().parse().unwrap()
}

/// The rows a `COPY ... TO STDOUT` printed, one text-format line each. (The harness trims
/// the output's end: every table here ends in a column that never ends in whitespace.)
fn copy_lines(pg: &PgCluster, db: &str, sql: &str) -> Vec<String> {
    let out = pg.psql(db, sql);
    if out.is_empty() {
        return Vec::new();
    }
    out.split('\n').map(str::to_owned).collect()
}

/// A field of COPY's text format as the value's text: the escapes COPY TO writes undone.
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next() {
            Some('b') => '\u{8}',
            Some('f') => '\u{c}',
            Some('n') => '\n',
            Some('r') => '\r',
            Some('t') => '\t',
            Some('v') => '\u{b}',
            Some(other) => other,
            None => panic!("COPY field ends in a lone backslash: {field:?}"),
        });
    }
    out
}

/// Walks `heap` with `chunk_copy` in chunks of `limit`, each chunk starting after the key
/// of the previous chunk's last row as COPY printed it; returns every row copied and the
/// number of chunks read.
fn walk(
    pg: &PgCluster,
    db: &str,
    relation: &Relation,
    heap: &QualifiedName,
    key: &[usize],
    filter: Option<&str>,
    limit: u64,
) -> (Vec<String>, usize) {
    let mut rows: Vec<String> = Vec::new();
    let mut after: Option<Vec<String>> = None;
    for chunks in 1..100_000 {
        let sql = chunk_copy(relation, heap, key, filter, after.as_deref(), limit).unwrap();
        let chunk = copy_lines(pg, db, &sql);
        assert!(chunk.len() as u64 <= limit, "{sql}: {} rows", chunk.len());
        let Some(last) = chunk.last() else {
            return (rows, chunks);
        };
        let fields: Vec<&str> = last.split('\t').collect();
        assert_eq!(fields.len(), relation.columns.len(), "{last:?}");
        let next: Vec<String> = key.iter().map(|&i| unescape(fields[i])).collect();
        assert_ne!(
            after.as_ref(),
            Some(&next),
            "{sql}: the walk does not advance"
        );
        after = Some(next);
        let done = (chunk.len() as u64) < limit;
        rows.extend(chunk);
        if done {
            return (rows, chunks);
        }
    }
    panic!("the walk of {heap} does not end");
}

/// The walk equals `whole` (the table in key order, one COPY), row for row, with no row
/// twice.
fn assert_exact(what: &str, walked: &[String], whole: &[String]) {
    let distinct: BTreeSet<&String> = walked.iter().collect();
    assert_eq!(distinct.len(), walked.len(), "{what}: a row copied twice");
    assert_eq!(walked.len(), whole.len(), "{what}: row count");
    if let Some(i) = (0..walked.len()).find(|&i| walked[i] != whole[i]) {
        panic!(
            "{what}: row {i} differs: walked {:?}, whole {:?}",
            walked[i], whole[i]
        );
    }
}

fn published_filter(pg: &PgCluster, db: &str, publication: &str) -> Option<String> {
    let owned = pg.query_rows(db, &published_tables_query(publication).unwrap());
    let borrowed: Vec<Vec<Option<&str>>> = owned
        .iter()
        .map(|r| r.iter().map(|c| c.as_deref()).collect())
        .collect();
    let rows: Vec<Row<'_>> = borrowed.iter().map(Vec::as_slice).collect();
    let tables = parse_published_tables(&rows).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tables.len(), 1, "{tables:?}");
    tables[0].row_filter.clone()
}

/// The composite-key table: key `(k1 int, k2 text)` declared after another column, so key
/// indexes are not the first columns; 20 rows per `k1`, so chunk bounds fall inside a `k1`.
fn composite(pg: &PgCluster, db: &str) -> Relation {
    pg.psql(
        db,
        "CREATE TABLE comp (v text, k1 int, k2 text, p text NOT NULL, PRIMARY KEY (k1, k2));
         INSERT INTO comp SELECT CASE WHEN g % 7 = 0 THEN NULL ELSE 'v' || g END, g % 1000,
           md5(g::text), 'p' || g FROM generate_series(1, 20000) g;
         ANALYZE comp;",
    );
    relation("comp", &["v", "k1", "k2", "p"])
}

#[test]
fn a_composite_key_walk_copies_exactly_the_ordered_table_with_and_without_a_row_filter() {
    let pg = PgCluster::start();
    let db = pg.create_database("keyset_walk");
    let comp = composite(&pg, &db);
    pg.psql(
        &db,
        "CREATE PUBLICATION p FOR TABLE comp WHERE (k1 % 3 <> 0);",
    );
    let filter = published_filter(&pg, &db, "p").expect("a row filter");
    assert_eq!(filter, "((k1 % 3) <> 0)", "as PostgreSQL prints it");

    let whole = copy_lines(
        &pg,
        &db,
        "COPY (SELECT v, k1, k2, p FROM comp ORDER BY k1, k2) TO STDOUT",
    );
    assert_eq!(whole.len(), 20_000);
    let (walked, chunks) = walk(&pg, &db, &comp, &public("comp"), &[1, 2], None, 1_000);
    assert_exact("unfiltered", &walked, &whole);
    assert_eq!(
        chunks, 21,
        "20 full chunks and the empty one that ends the walk"
    );

    let filtered_whole = copy_lines(
        &pg,
        &db,
        &format!("COPY (SELECT v, k1, k2, p FROM comp WHERE ({filter}) ORDER BY k1, k2) TO STDOUT"),
    );
    assert_eq!(
        filtered_whole.len(),
        20_000 - 20 * 334,
        "k1 = 0, 3, ..., 999"
    );
    let (walked, chunks) = walk(
        &pg,
        &db,
        &comp,
        &public("comp"),
        &[1, 2],
        Some(&filter),
        1_000,
    );
    assert_exact("filtered", &walked, &filtered_whole);
    assert_eq!(chunks, 14);
}

#[test]
fn a_walk_is_exact_for_every_key_type() {
    let pg = PgCluster::start();
    let db = pg.create_database("keyset_types");
    let cases: &[(&str, &str, &str)] = &[
        (
            "int8",
            "int8",
            "SELECT (g - 150) * 61489146912345 FROM generate_series(1, 300) g
             UNION ALL VALUES (-9223372036854775808), (9223372036854775807)",
        ),
        (
            "text",
            "text",
            "SELECT CASE g % 8
               WHEN 0 THEN 'it''s ' || g
               WHEN 1 THEN E'back\\\\slash\\\\' || g
               WHEN 2 THEN E'tab\\there ' || g
               WHEN 3 THEN E'new\\nline\\r' || g
               WHEN 4 THEN 'ünïcødé ☃ ' || g
               WHEN 5 THEN ' lead' || g || ' '
               WHEN 6 THEN E'\\\\N' || g
               ELSE '\"q\"' || g END
             FROM generate_series(1, 300) g
             UNION ALL VALUES (''), ('\\'), (E'\\\\'), ('\\N'), (E'\\t')",
        ),
        (
            "uuid",
            "uuid",
            "SELECT md5(g::text)::uuid FROM generate_series(1, 300) g
             UNION ALL VALUES ('00000000-0000-0000-0000-000000000000'::uuid),
               ('ffffffff-ffff-ffff-ffff-ffffffffffff')",
        ),
        (
            "timestamptz",
            "timestamptz",
            "SELECT timestamptz '1999-12-31 23:59:59.999999+00'
               + (g - 150) * interval '1 day 3 hours 0.000007 seconds'
             FROM generate_series(1, 300) g
             UNION ALL VALUES ('-infinity'::timestamptz), ('infinity'), ('0044-03-15 12:00+00 BC')",
        ),
        (
            "numeric",
            "numeric",
            "SELECT round((g - 150)::numeric / 7, g % 9) FROM generate_series(1, 300) g
             UNION ALL VALUES ('NaN'::numeric), (1e30), (-1e-30), (0.000), (123456789012345678901234567890.123456789)",
        ),
    ];
    for (name, pg_type, values) in cases {
        let table = format!("t_{name}");
        pg.psql(
            &db,
            &format!(
                "CREATE TABLE {table} (k {pg_type} PRIMARY KEY, p text NOT NULL);
                 INSERT INTO {table} SELECT k, 'p' || row_number() OVER () FROM ({values}) AS v(k)
                   ON CONFLICT DO NOTHING;"
            ),
        );
        let count: usize = pg.query_rows(&db, &format!("SELECT count(*) FROM {table}"))[0][0]
            .as_deref()
            .unwrap()
            .parse()
            .unwrap();
        assert!(count > 250, "{name}: {count} rows");
        let whole = copy_lines(
            &pg,
            &db,
            &format!("COPY (SELECT k, p FROM {table} ORDER BY k) TO STDOUT"),
        );
        assert_eq!(whole.len(), count, "{name}");
        let r = relation(&table, &["k", "p"]);
        let (walked, chunks) = walk(&pg, &db, &r, &public(&table), &[0], None, 7);
        assert_exact(name, &walked, &whole);
        assert_eq!(chunks, count / 7 + 1, "{name}");
    }
}

/// The SELECT inside a chunk's COPY.
fn chunk_select(sql: &str) -> &str {
    sql.strip_prefix("COPY (")
        .and_then(|s| s.strip_suffix(") TO STDOUT"))
        .unwrap_or_else(|| panic!("not a COPY of a query: {sql}"))
}

fn explain(pg: &PgCluster, db: &str, sql: &str) -> String {
    pg.psql(db, &format!("EXPLAIN (COSTS OFF) {}", chunk_select(sql)))
}

#[test]
fn a_chunk_is_an_index_scan_on_the_primary_key_without_a_sort() {
    let pg = PgCluster::start();
    let db = pg.create_database("keyset_plan");
    let comp = composite(&pg, &db);
    let heap = public("comp");
    let after = ["500".to_owned(), md5_like()];
    let filter = "((k1 % 3) <> 0)";
    for (what, sql) in [
        (
            "first",
            chunk_copy(&comp, &heap, &[1, 2], None, None, 1_000).unwrap(),
        ),
        (
            "later",
            chunk_copy(&comp, &heap, &[1, 2], None, Some(&after), 1_000).unwrap(),
        ),
        (
            "filtered",
            chunk_copy(&comp, &heap, &[1, 2], Some(filter), Some(&after), 1_000).unwrap(),
        ),
    ] {
        let plan = explain(&pg, &db, &sql);
        eprintln!("{what}: {plan}");
        assert!(
            plan.contains("Index Scan using comp_pkey on comp"),
            "{what}: {plan}"
        );
        assert!(!plan.contains("Sort"), "{what}: {plan}");
        if what != "first" {
            assert!(
                plan.contains("Index Cond: (ROW(k1, k2) > ROW(500, '"),
                "{what}: the literals coerced to the key's types: {plan}"
            );
        }
    }
    // One key column: the row constructor of one value is that value.
    pg.psql(
        &db,
        "CREATE TABLE one (id int8 PRIMARY KEY, p text NOT NULL);
         INSERT INTO one SELECT g, 'p' || g FROM generate_series(1, 20000) g; ANALYZE one;",
    );
    let one = relation("one", &["id", "p"]);
    let sql = chunk_copy(
        &one,
        &public("one"),
        &[0],
        None,
        Some(&["77".into()]),
        1_000,
    )
    .unwrap();
    let plan = explain(&pg, &db, &sql);
    assert!(plan.contains("Index Scan using one_pkey on one"), "{plan}");
    assert!(plan.contains("Index Cond: (id > '77'::bigint)"), "{plan}");
    assert!(!plan.contains("Sort"), "{plan}");
}

fn md5_like() -> String {
    "7f".repeat(16)
}

#[test]
fn a_watermark_answers_the_lsn_of_its_message() {
    let pg = PgCluster::start();
    let db = pg.create_database("keyset_watermark");
    let v17 = server_version_num(&pg, &db) >= 170_000;
    pg.psql(
        &db,
        "CREATE TABLE t (k int PRIMARY KEY); CREATE PUBLICATION p FOR TABLE t;",
    );
    pg.psql(
        &db,
        "SELECT pg_create_logical_replication_slot('wm', 'pgoutput')",
    );
    let emit = |content: &str, flush: bool| -> Lsn {
        let sql = watermark("slotline-test", content, flush).unwrap();
        let rows = pg.query_rows(&db, &sql);
        let text = rows[0][0].as_deref().unwrap();
        text.parse()
            .unwrap_or_else(|e| panic!("{sql} answered {text:?}: {e}"))
    };
    let low = emit("low 1 it's a \\ backslash", false);
    let high = emit("high 1", v17);
    assert!(!low.is_zero() && high > low, "{low} then {high}");
    eprintln!("watermarks {low} then {high} (flush: {v17})");
    let flush_sql = watermark("slotline-test", "x", true).unwrap();
    if v17 {
        emit("flushed", true);
    } else {
        let refused = pg.try_psql(&db, &flush_sql).unwrap_err();
        assert!(refused.contains("does not exist"), "{refused}");
    }
    // The message the stream carries has the LSN the call answered (pgoutput proto 1:
    // 'M', flags 0, the LSN, the prefix).
    let expected: Vec<String> = [low, high]
        .into_iter()
        .map(|lsn| format!("4d00{:016x}{}00", lsn.0, hex("slotline-test")))
        .collect();
    let seen = wait_for(Duration::from_secs(10), || {
        let rows = pg.query_rows(
            &db,
            "SELECT lsn::text, encode(data, 'hex') FROM pg_logical_slot_peek_binary_changes('wm', NULL, NULL,
               'proto_version', '1', 'publication_names', 'p', 'messages', 'true')
             WHERE get_byte(data, 0) = 77",
        );
        let messages: Vec<(String, String)> = rows
            .into_iter()
            .map(|r| (r[0].clone().unwrap(), r[1].clone().unwrap()))
            .collect();
        (messages.len() >= 2).then_some(messages)
    })
    .expect("both watermarks decoded within 10 s");
    for (i, lsn) in [low, high].into_iter().enumerate() {
        assert_eq!(seen[i].0, lsn.to_string());
        assert!(
            seen[i].1.starts_with(&expected[i]),
            "{}: {}",
            expected[i],
            seen[i].1
        );
    }
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

/// One psql session held open through a pipe: each `query` waits for its output, so a
/// transaction stays open across other sessions' statements.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    marker: u32,
}

impl Session {
    fn open(pg: &PgCluster, db: &str) -> Session {
        Session::open_as(pg, db, "postgres")
    }

    fn open_as(pg: &PgCluster, db: &str, user: &str) -> Session {
        let local = find_pg_bin().unwrap().join("psql");
        let psql = if local.is_file() {
            local
        } else {
            "psql".into()
        };
        let mut child = Command::new(psql)
            .args([
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                pg.host(),
            ])
            .args(["-p", &pg.port().to_string(), "-U", user, "-d", db])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start psql");
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Session {
            stdin: child.stdin.take(),
            child,
            lines,
            marker: 0,
        }
    }

    fn write(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Sends `sql` without waiting for its answer.
    fn send(&mut self, sql: &str) {
        self.write(&format!("{sql};\n"));
    }

    /// Runs `sql` and returns the lines it printed.
    fn query(&mut self, sql: &str) -> Vec<String> {
        self.marker += 1;
        let marker = format!("--slotline-done-{}--", self.marker);
        self.write(&format!("{sql};\n\\echo {marker}\n"));
        let mut out = Vec::new();
        loop {
            match self.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(line) if line == marker => return out,
                Ok(line) => out.push(line),
                Err(RecvTimeoutError::Timeout) => panic!("{sql}: no answer in 60 s"),
                Err(RecvTimeoutError::Disconnected) => {
                    let mut err = String::new();
                    if let Some(mut stderr) = self.child.stderr.take() {
                        let _ = stderr.read_to_string(&mut err);
                    }
                    panic!("{sql}: psql ended: {err}");
                }
            }
        }
    }

    fn one(&mut self, sql: &str) -> String {
        let out = self.query(sql);
        assert_eq!(out.len(), 1, "{sql}: {out:?}");
        out[0].clone()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn current_snapshot(pg: &PgCluster, db: &str) -> String {
    pg.query_rows(db, snapshot_query())[0][0].clone().unwrap()
}

#[test]
fn a_chunk_reads_under_one_snapshot_that_its_transaction_answers_throughout() {
    let pg = PgCluster::start();
    let db = pg.create_database("keyset_snapshot");
    let version = pg.query_rows(&db, "SHOW server_version")[0][0]
        .clone()
        .unwrap();
    eprintln!("PostgreSQL {version}");
    pg.psql(
        &db,
        "CREATE TABLE s (k int PRIMARY KEY, p text NOT NULL);
         INSERT INTO s SELECT g, 'p' || g FROM generate_series(1, 100) g;",
    );
    let r = relation("s", &["k", "p"]);
    // As one simple-query string: BEGIN's tag, then the snapshot's one row.
    let once = pg.query_rows(&db, chunk_begin());
    assert_eq!(once.len(), 1, "{once:?}");
    assert_eq!(once[0][0].as_deref().map(|t| t.split(':').count()), Some(3));
    let mut chunk = Session::open(&pg, &db);
    let before = chunk.one(chunk_begin());
    assert!(chunk.query(committed_but_running_query()).is_empty());
    // Other sessions commit (each with an xid) while the chunk's transaction is open.
    for k in 101..=105 {
        pg.psql(&db, &format!("INSERT INTO s VALUES ({k}, 'late')"));
    }
    let outside = current_snapshot(&pg, &db);
    assert_ne!(outside, before, "the commits moved the snapshot outside");
    let rows = chunk.query(&chunk_copy(&r, &public("s"), &[0], None, None, 1_000).unwrap());
    assert_eq!(
        rows.len(),
        100,
        "the COPY read under the snapshot taken first"
    );
    assert_eq!(chunk.one(snapshot_query()), before, "after the COPY");
    for k in 106..=108 {
        pg.psql(&db, &format!("INSERT INTO s VALUES ({k}, 'later')"));
    }
    assert_eq!(chunk.one(snapshot_query()), before, "after more commits");
    assert!(
        chunk.query(committed_but_running_query()).is_empty(),
        "no transaction was running when the snapshot was taken"
    );
    chunk.query("COMMIT");
    assert_ne!(chunk.one(snapshot_query()), before, "a new transaction");
    eprintln!("snapshot held {before}, outside meanwhile {outside}");
}

/// `committed_but_running_query` names the transactions the chunk's snapshot listed as in
/// progress whose commit is written since. The §3 race made to last (a synchronous standby
/// that never answers) shows its two tests: the commit is in the commit log while
/// `pg_xact_status` still says "in progress" (it asks the proc array first), and the
/// writer's backend waits on `SyncRep` with the transaction's xid. First at the snapshot's
/// `xmax` (the newest transaction): not in the list, not named. Then in the list once a later
/// one has completed: named while it waits, to a superuser and to a member of `pg_monitor`
/// (who see every backend's wait), not to a plain replication role (who sees the writer's
/// `backend_xid` but not its wait), nor in another database; named to all once the wait is
/// cancelled, inside the same chunk transactions.
#[test]
fn committed_but_running_names_what_the_snapshot_listed_as_running_and_has_committed_since() {
    // No autovacuum: no other transaction takes an xid between the writer's and the chunk's.
    let pg = PgCluster::start_with(ClusterOptions::default().setting("autovacuum", "off"));
    let db = pg.create_database("keyset_race");
    pg.psql(
        &db,
        "CREATE TABLE s (k int PRIMARY KEY); \
         CREATE ROLE copier LOGIN REPLICATION; \
         CREATE ROLE monitor LOGIN REPLICATION IN ROLE pg_monitor; \
         GRANT SELECT ON s TO copier, monitor;",
    );
    pg.psql(
        "postgres",
        "ALTER SYSTEM SET synchronous_standby_names = 'nosuch'",
    );
    pg.psql("postgres", "SELECT pg_reload_conf()");
    let mut writer = Session::open(&pg, &db);
    writer.query("BEGIN");
    let xid: u64 = writer
        .one("SELECT pg_current_xact_id()::text")
        .parse()
        .unwrap();
    writer.query("INSERT INTO s VALUES (1)");
    writer.send("COMMIT");
    let waiting = wait_for(Duration::from_secs(10), || {
        let rows = pg.query_rows(
            &db,
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'",
        );
        (rows[0][0].as_deref() == Some("1")).then_some(())
    });
    assert!(waiting.is_some(), "the commit waits for the standby");
    let status = || {
        pg.query_rows(&db, &format!("SELECT pg_xact_status('{xid}')"))[0][0]
            .clone()
            .unwrap()
    };
    assert_eq!(
        status(),
        "in progress",
        "committed in the commit log, still running"
    );

    let mut chunk = Session::open(&pg, &db);
    let newest = chunk.one(chunk_begin());
    assert_eq!(newest, format!("{xid}:{xid}:"), "the newest: at xmax");
    assert!(chunk.query(committed_but_running_query()).is_empty());
    assert!(chunk.query("SELECT k FROM s").is_empty(), "not visible");
    chunk.query("COMMIT");

    // A later transaction completes (without waiting for the standby).
    pg.psql(
        &db,
        "SET synchronous_commit = local; CREATE TABLE later (k int);",
    );
    let named = [xid.to_string()];
    let listed = chunk.one(chunk_begin());
    assert!(
        listed.starts_with(&format!("{xid}:")) && listed.ends_with(&format!(":{xid}")),
        "in progress: {listed}"
    );
    assert_eq!(
        chunk.query(committed_but_running_query()),
        named,
        "its backend waits on SyncRep: named while it waits"
    );
    assert!(chunk.query("SELECT k FROM s").is_empty(), "not visible");
    assert_eq!(chunk.one(reads_every_wait_query()), "true", "a superuser");

    let mut monitor = Session::open_as(&pg, &db, "monitor");
    assert_eq!(monitor.one(chunk_begin()), listed);
    assert_eq!(monitor.query(committed_but_running_query()), named);
    assert_eq!(monitor.one(reads_every_wait_query()), "true");

    // A plain replication role sees the writer's xid but not its wait: the question still
    // answers, without it.
    let mut copier = Session::open_as(&pg, &db, "copier");
    assert_eq!(copier.one(chunk_begin()), listed);
    assert_eq!(
        copier.query(
            "SELECT coalesce(backend_xid::text, 'NULL') || ' ' || coalesce(wait_event, 'NULL') \
             FROM pg_stat_activity WHERE backend_xid IS NOT NULL"
        ),
        [format!("{} NULL", xid & 0xffff_ffff)],
        "backend_xid shown, wait_event hidden"
    );
    assert!(copier.query(committed_but_running_query()).is_empty());
    assert!(copier.query("SELECT k FROM s").is_empty(), "not visible");
    assert_eq!(copier.one(reads_every_wait_query()), "false");

    // The writer is of another database than this chunk: its xid is listed (xids are the
    // cluster's), its wait is not this database's.
    let mut elsewhere = Session::open(&pg, "postgres");
    assert_eq!(elsewhere.one(chunk_begin()), listed);
    assert!(elsewhere.query(committed_but_running_query()).is_empty());
    elsewhere.query("COMMIT");

    // The wait ends (the commit stays), while the chunks' transactions are still open.
    pg.psql(
        &db,
        "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'",
    );
    writer.query("SELECT 1");
    assert_eq!(status(), "committed");
    for session in [&mut chunk, &mut monitor, &mut copier] {
        assert_eq!(session.one(snapshot_query()), listed);
        assert_eq!(session.query(committed_but_running_query()), named);
        assert!(
            session.query("SELECT k FROM s").is_empty(),
            "still not visible to the chunk"
        );
        session.query("COMMIT");
    }
    assert_eq!(pg.psql(&db, "SELECT k FROM s"), "1", "committed");
    pg.psql("postgres", "ALTER SYSTEM RESET synchronous_standby_names");
    pg.psql("postgres", "SELECT pg_reload_conf()");
}
