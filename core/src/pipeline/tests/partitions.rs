//! Partitioned tables: the user routes the partitioned table; its partitions' Relation
//! messages are announcements, their rows go to its route by column name, a partition the
//! session's catalog does not know makes the next session read the catalog again, and a
//! TRUNCATE that leaves some partitions full stops the stream without acknowledging.
use super::*;
use crate::pgoutput::OldKind;
use crate::Lsn;
use serde_json::json;

const METRICS_SCHEMA: &str = r#"{"inputs":[
 {"name":"metrics","case_sensitive":false,"primary_key":["id"],"materialized":false,"properties":{},
  "fields":[{"name":"id","case_sensitive":false,"columntype":{"type":"BIGINT","nullable":false}},
            {"name":"bucket","case_sensitive":false,"columntype":{"type":"INTEGER","nullable":false}},
            {"name":"v","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":true,"precision":-1}}]}
],"outputs":[]}"#;

const METRICS: u32 = 20000;
const METRICS_A: u32 = 20001;
/// Its columns are in another order than the partitioned table's (v, bucket, id).
const METRICS_B: u32 = 20002;
const METRICS_DEFAULT: u32 = 20003;
const METRICS_C: u32 = 20004;

const ID_BUCKET_V: &[(&str, u32, bool)] =
    &[("id", 20, true), ("bucket", 23, true), ("v", 25, false)];

fn table(oid: u32, name: &str, columns: &[(&str, u32, bool)]) -> FakeTable {
    FakeTable::new(oid, name, ReplicaIdentity::Default, columns)
}

fn metrics_b() -> FakeTable {
    table(
        METRICS_B,
        "metrics_b",
        &[("v", 25, false), ("bucket", 23, true), ("id", 20, true)],
    )
}

fn metrics_c() -> FakeTable {
    table(METRICS_C, "metrics_c", ID_BUCKET_V)
}

/// metrics, partitioned into metrics_a, metrics_b (columns in another order) and a
/// DEFAULT partition.
fn metrics() -> FakeTable {
    table(METRICS, "metrics", ID_BUCKET_V)
        .with_partition(table(METRICS_A, "metrics_a", ID_BUCKET_V), true, METRICS)
        .with_partition(metrics_b(), true, METRICS)
        .with_partition(
            table(METRICS_DEFAULT, "metrics_default", ID_BUCKET_V),
            true,
            METRICS,
        )
}

fn metrics_pg(via_root: bool) -> FakePg {
    let mut pg = pg();
    pg.tables = vec![metrics()];
    pg.via_root = via_root;
    pg
}

fn streaming_metrics(via_root: bool, config: &[(&str, &str)]) -> Script {
    let mut pairs = vec![("TABLES", "metrics"), ("BATCH_LINGER_MS", "0")];
    pairs.extend_from_slice(config);
    Script::streaming(&pairs, metrics_pg(via_root), METRICS_SCHEMA)
}

fn leaf(name: &str) -> FakeTable {
    match name {
        "metrics_a" => table(METRICS_A, "metrics_a", ID_BUCKET_V),
        "metrics_b" => metrics_b(),
        "metrics_c" => metrics_c(),
        _ => table(METRICS_DEFAULT, "metrics_default", ID_BUCKET_V),
    }
}

#[test]
fn with_publish_via_partition_root_a_partitions_relation_is_an_announcement_not_a_change() {
    let mut s = streaming_metrics(true, &[]);
    s.wal(
        "tx 700: insert into metrics_a and metrics_b, announced after metrics, written as metrics",
        &[
            begin(0x2100, 700),
            relation(&metrics()),
            relation(&leaf("metrics_a")),
            insert(0x2010, METRICS, &[Some("1"), Some("1"), Some("a")]),
            relation(&metrics()),
            relation(&leaf("metrics_b")),
            insert(0x2020, METRICS, &[Some("2"), Some("2"), Some("b")]),
            commit(0x20F8, 0x2100),
        ],
    );
    s.settle();
    assert_eq!(s.confirmed, Lsn(0x2100));
    assert_eq!(
        s.feldera.contents("metrics"),
        [
            json!({"id": 1, "bucket": 1, "v": "a"}),
            json!({"id": 2, "bucket": 2, "v": "b"})
        ]
    );
    rule!(
        "Under publish_via_partition_root = true pgoutput announces the partition a row was written to after the partitioned table, and sends the row as the partitioned table's: the announcement is no change, and the rows reach Feldera's metrics.",
        s.take_trace()
    );
}

#[test]
fn rows_of_every_partition_go_to_the_partitioned_tables_route_by_column_name() {
    let mut s = streaming_metrics(false, &[]);
    s.wal(
        "tx 700: insert into each partition (metrics_b's columns are v, bucket, id)",
        &[
            begin(0x2100, 700),
            relation(&leaf("metrics_a")),
            insert(0x2010, METRICS_A, &[Some("1"), Some("1"), Some("a")]),
            relation(&leaf("metrics_b")),
            insert(0x2020, METRICS_B, &[Some("b"), Some("2"), Some("2")]),
            relation(&leaf("metrics_default")),
            insert(0x2030, METRICS_DEFAULT, &[Some("3"), Some("9"), Some("d")]),
            commit(0x20F8, 0x2100),
        ],
    );
    s.settle();
    s.wal(
        "tx 701: UPDATE moving id 1 to bucket 2 (a delete in metrics_a, an insert in metrics_b); UPDATE of id 2 in place; DELETE of id 3",
        &[
            begin(0x2200, 701),
            delete(0x2110, METRICS_A, OldKind::Key, &[Some("1"), Some("1"), None]),
            insert(0x2120, METRICS_B, &[Some("moved"), Some("2"), Some("1")]),
            update(0x2130, METRICS_B, None, &[Some("x"), Some("2"), Some("2")]),
            delete(
                0x2140,
                METRICS_DEFAULT,
                OldKind::Key,
                &[Some("3"), Some("9"), None],
            ),
            commit(0x21F8, 0x2200),
        ],
    );
    s.settle();
    assert_eq!(s.confirmed, Lsn(0x2200));
    assert_eq!(
        s.feldera.contents("metrics"),
        [
            json!({"id": 1, "bucket": 2, "v": "moved"}),
            json!({"id": 2, "bucket": 2, "v": "x"})
        ]
    );
    rule!(
        "Under publish_via_partition_root = false each row comes under its partition's Relation; every partition of the routed table maps onto Feldera's metrics by column name (metrics_b's columns are in another order), and an UPDATE moving a row across partitions arrives, and is sent, as a delete and an insert.",
        format!(
            "{}--- what Feldera received:\n{}",
            s.take_trace(),
            s.completed_lines().join("\n")
        )
    );
}

/// The stream of one transaction inserting id 7 into metrics_c, a partition the catalog
/// did not have when the session started.
fn insert_into_metrics_c(s: &mut Script) {
    s.wal(
        "tx 702: insert into metrics_c",
        &[
            begin(0x2300, 702),
            relation(&leaf("metrics_c")),
            insert(0x2210, METRICS_C, &[Some("7"), Some("3"), Some("c")]),
            commit(0x22F8, 0x2300),
        ],
    );
}

#[test]
fn a_row_of_a_partition_attached_while_streaming_ends_the_session_and_the_next_reads_the_catalog_again(
) {
    let mut s = streaming_metrics(false, &[]);
    s.change_catalog("ALTER TABLE metrics ATTACH PARTITION metrics_c", |pg| {
        pg.tables[0] = metrics().with_partition(metrics_c(), true, METRICS);
    });
    insert_into_metrics_c(&mut s);
    assert_eq!(
        s.confirmed, START,
        "nothing of the transaction acknowledged"
    );
    s.advance(200);
    insert_into_metrics_c(&mut s);
    s.settle();
    assert_eq!(s.confirmed, Lsn(0x2300));
    assert_eq!(
        s.feldera.contents("metrics"),
        [json!({"id": 7, "bucket": 3, "v": "c"})]
    );
    assert!(s.exit().is_none());
    rule!(
        "A row of a relation the session's catalog does not place (a partition attached after the catalog was read) ends the session without acknowledging; the next session reads the catalog again, now places metrics_c on metrics' route, and delivers the replayed row.",
        s.take_trace()
    );
}

#[test]
fn a_row_still_unplaceable_after_reading_the_catalog_again_exits_1() {
    let mut s = streaming_metrics(false, &[]);
    insert_into_metrics_c(&mut s);
    s.advance(200);
    insert_into_metrics_c(&mut s);
    assert_eq!(s.confirmed, START);
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    rule!(
        "A row whose relation is still neither routed nor a partition of a routed table once the catalog was read again (metrics_c was attached, written to and detached before either read) exits 1 naming it, acknowledging nothing of its transaction: one fresh catalog per change, never a reconnect loop.",
        s.take_trace()
    );
}

#[test]
fn a_truncate_of_every_partition_empties_the_table_in_feldera() {
    let mut s = streaming_metrics(false, &[]);
    s.feldera.apply(
        "metrics",
        "{\"insert\":{\"id\":1,\"bucket\":1,\"v\":\"a\"}}\n{\"insert\":{\"id\":2,\"bucket\":2,\"v\":\"b\"}}\n",
    );
    s.wal(
        "tx 700: TRUNCATE metrics (listed as its partitions)",
        &[
            begin(0x2100, 700),
            relation(&leaf("metrics_a")),
            relation(&leaf("metrics_b")),
            relation(&leaf("metrics_default")),
            truncate(0x2010, &[METRICS_A, METRICS_B, METRICS_DEFAULT]),
            commit(0x20F8, 0x2100),
        ],
    );
    for _ in 0..100 {
        if !s.step() {
            s.advance(10);
        }
    }
    assert_eq!(s.feldera.rows("metrics"), 0);
    assert_eq!(s.confirmed, Lsn(0x2100));
    rule!(
        "Under publish_via_partition_root = false a TRUNCATE of the partitioned table lists every partition: together they are the whole table, whose keys are retracted from Feldera and verified gone.",
        s.take_trace()
    );
}

#[test]
fn a_truncate_of_some_partitions_reads_the_catalog_again_then_exits_1_acknowledging_nothing() {
    let mut s = streaming_metrics(false, &[]);
    let truncate_b = |s: &mut Script| {
        s.wal(
            "tx 700: TRUNCATE metrics_b",
            &[
                begin(0x2100, 700),
                relation(&leaf("metrics_b")),
                truncate(0x2010, &[METRICS_B]),
                commit(0x20F8, 0x2100),
            ],
        );
    };
    truncate_b(&mut s);
    s.advance(200);
    truncate_b(&mut s);
    assert_eq!(s.confirmed, START);
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    assert_eq!(s.waiting_requests(), 0, "no key was read, nothing deleted");
    rule!(
        "A TRUNCATE of some partitions of a routed table cannot be propagated exactly (Feldera's table holds every partition's rows and cannot tell them apart): the session reads the catalog again once (a partition detached since would explain it), then exits 1, acknowledging nothing and naming the way out.",
        s.take_trace()
    );
}

fn metric_rows(ids: std::ops::Range<u32>, bucket: u32) -> Vec<Vec<Option<String>>> {
    ids.map(|i| {
        vec![
            Some(i.to_string()),
            Some(bucket.to_string()),
            Some(format!("v{i}")),
        ]
    })
    .collect()
}

#[test]
fn a_partitioned_table_is_copied_through_its_leaves_in_parallel_and_leftovers_are_retracted() {
    let mut pg = metrics_pg(false);
    // A slot without a state file: copy again, retracting what the copy does not carry.
    pg.slot_confirmed = Some(START);
    pg.tables = vec![table(METRICS, "metrics", ID_BUCKET_V)
        .with_partition(
            table(METRICS_A, "metrics_a", ID_BUCKET_V).with_rows(metric_rows(0..3000, 1), 3000),
            true,
            METRICS,
        )
        .with_partition(
            metrics_b().with_rows(metric_rows(3000..3100, 2), 100),
            true,
            METRICS,
        )
        .with_partition(
            table(METRICS_DEFAULT, "metrics_default", ID_BUCKET_V),
            true,
            METRICS,
        )];
    let mut s = Script::new(
        &[
            ("TABLES", "metrics"),
            ("SNAPSHOT_MODE", "initial"),
            ("SNAPSHOT_WORKERS", "2"),
            ("BATCH_MAX_ROWS", "12500"),
        ],
        pg,
        METRICS_SCHEMA,
    );
    s.feldera.apply(
        "metrics",
        "{\"insert\":{\"id\":5,\"bucket\":1,\"v\":\"old\"}}\n{\"insert\":{\"id\":99999,\"bucket\":1,\"v\":\"ghost\"}}\n",
    );
    for _ in 0..200 {
        if s.exit().is_some() || s.pipeline().health().streaming {
            break;
        }
        s.settle();
        s.advance(10);
    }
    assert_eq!(s.exit(), None);
    assert!(s.pipeline().health().streaming);
    assert_eq!(
        s.feldera.rows("metrics"),
        3100,
        "every row of every leaf, no ghost"
    );
    assert_eq!(
        s.feldera.contents("metrics")[5],
        json!({"id": 5, "bucket": 1, "v": "v5"})
    );
    let trace = s.take_trace();
    let copies: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("query COPY (SELECT"))
        .collect();
    assert!(
        copies
            .iter()
            .all(|c| !c.contains("FROM \"public\".\"metrics\" ")),
        "a partitioned table has no heap of its own: {copies:?}"
    );
    rule!(
        "A partitioned table is copied through its leaf partitions, measured under the snapshot and cut into ranges like tables of their own (metrics_a's 3,000 blocks in 3 ranges, the small leaves whole; the second worker copies while the first retracts), each selecting the partitioned table's columns by name; leftovers (id 99999) are retracted through the partitioned table and the count is verified (only COPY, retraction and snapshot lines shown).",
        trace
            .lines()
            .filter(|l| l.contains("COPY") || l.contains("snapshot ") || l.contains("retract "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn a_mapping_warning_is_said_once_however_often_the_partitioned_tables_relation_is_resent() {
    let narrow = METRICS_SCHEMA.replace(
        r#",
            {"name":"v","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":true,"precision":-1}}"#,
        "",
    );
    assert_ne!(narrow, METRICS_SCHEMA);
    let mut s = Script::streaming(
        &[("TABLES", "metrics"), ("BATCH_LINGER_MS", "0")],
        metrics_pg(true),
        &narrow,
    );
    s.wal(
        "tx 700: rows of metrics_a and metrics_b, each announced after metrics",
        &[
            begin(0x2100, 700),
            relation(&metrics()),
            relation(&leaf("metrics_a")),
            insert(0x2010, METRICS, &[Some("1"), Some("1"), Some("a")]),
            relation(&metrics()),
            relation(&leaf("metrics_b")),
            insert(0x2020, METRICS, &[Some("2"), Some("2"), Some("b")]),
            commit(0x20F8, 0x2100),
        ],
    );
    s.settle();
    let trace = s.take_trace();
    let warnings = trace
        .lines()
        .filter(|l| l.contains("PostgreSQL column(s) v have no Feldera column"))
        .count();
    assert_eq!(warnings, 1, "{trace}");
    assert_eq!(s.confirmed, Lsn(0x2100));
}

/// Streaming metrics (`publish_via_partition_root = false`) from a complete copy whose
/// state file was written before leaves were recorded.
fn streaming_metrics_copied() -> Script {
    let state = complete_state(vec![state_route("public.metrics", "metrics", None)]);
    let mut s = Script::with_state(
        &[
            ("TABLES", "metrics"),
            ("BATCH_LINGER_MS", "0"),
            ("SNAPSHOT_MODE", "initial"),
        ],
        metrics_pg(false),
        METRICS_SCHEMA,
        Some(state.encode()),
    );
    s.settle();
    s
}

/// The leaf OIDs the state file records.
fn recorded_leaves(s: &Script) -> Vec<u64> {
    let file: serde_json::Value =
        serde_json::from_slice(s.state_file.as_deref().expect("a state file")).unwrap();
    file["routes"][0]["leaves"]
        .as_array()
        .map(|leaves| leaves.iter().filter_map(|l| l["oid"].as_u64()).collect())
        .unwrap_or_default()
}

#[test]
fn changes_of_a_partition_detached_and_dropped_since_are_placed_by_the_recorded_leaves() {
    let mut s = streaming_metrics_copied();
    assert_eq!(
        recorded_leaves(&s),
        [METRICS_A, METRICS_B, METRICS_DEFAULT].map(u64::from),
        "the first session records every leaf the catalog shows"
    );
    s.change_catalog(
        "DELETE FROM metrics WHERE bucket = 1; ALTER TABLE metrics DETACH PARTITION metrics_a; DROP TABLE metrics_a (while the connection is down)",
        |pg| {
            pg.tables[0] = table(METRICS, "metrics", ID_BUCKET_V)
                .with_partition(metrics_b(), true, METRICS)
                .with_partition(
                    table(METRICS_DEFAULT, "metrics_default", ID_BUCKET_V),
                    true,
                    METRICS,
                );
        },
    );
    s.feldera.apply(
        "metrics",
        "{\"insert\":{\"id\":1,\"bucket\":1,\"v\":\"a\"}}\n{\"insert\":{\"id\":2,\"bucket\":2,\"v\":\"b\"}}\n",
    );
    s.disconnect();
    s.advance(200);
    s.settle();
    s.wal(
        "tx 700: the delete, decoded with the catalog of its time: under metrics_a, whose OID the new catalog no longer has",
        &[
            begin(0x2100, 700),
            relation(&leaf("metrics_a")),
            delete(0x2010, METRICS_A, OldKind::Key, &[Some("1"), Some("1"), None]),
            commit(0x20F8, 0x2100),
        ],
    );
    s.settle();
    assert!(s.exit().is_none(), "{:?}", s.exit());
    assert_eq!(s.confirmed, Lsn(0x2100));
    assert_eq!(
        s.feldera.contents("metrics"),
        [json!({"id": 2, "bucket": 2, "v": "b"})]
    );
    assert_eq!(
        recorded_leaves(&s),
        [METRICS_A, METRICS_B, METRICS_DEFAULT].map(u64::from),
        "a leaf gone from the catalog stays recorded"
    );
    rule!(
        "A leaf the state file records keeps its route after it is detached and dropped: a session whose catalog no longer has it places the changes still in the slot under its OID on the route of metrics, and acknowledges them.",
        s.take_trace()
    );
}

#[test]
fn a_partition_attached_later_is_recorded_when_a_session_finds_it_in_the_catalog() {
    let mut s = streaming_metrics_copied();
    s.take_trace();
    s.change_catalog("ALTER TABLE metrics ATTACH PARTITION metrics_c", |pg| {
        pg.tables[0] = metrics().with_partition(metrics_c(), true, METRICS);
    });
    s.disconnect();
    s.advance(200);
    s.settle();
    assert_eq!(
        recorded_leaves(&s),
        [METRICS_A, METRICS_B, METRICS_DEFAULT, METRICS_C].map(u64::from)
    );
    s.disconnect();
    s.advance(200);
    s.settle();
    rule!(
        "A session whose catalog shows a leaf the state file does not record writes it into the file before it streams (once: the next session finds it recorded and writes nothing).",
        s.take_trace()
    );
}
