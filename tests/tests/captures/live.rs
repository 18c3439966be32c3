//! Against a real PostgreSQL: re-capture the workload with the core's `Connection` over TCP
//! and compare its structure with the committed fixture (or rewrite the fixture when
//! `SLOTLINE_REGENERATE_CAPTURES=1`), and read the same rows with COPY.
//!
//! Both tests give the database hostile defaults first (TimeZone, DateStyle and
//! IntervalStyle that change how values print), so equality with the fixture proves the
//! replication and COPY sessions pin their own settings.

use slotline_core::conn::{ConnectionConfig, Event};
use slotline_core::copy::CopyRow;
use slotline_core::pgoutput::{self, Datum, Message};
use slotline_tests::driver::Driver;
use slotline_tests::pg::PgCluster;

use super::decode::{
    end_of_marker_transaction, frames, json_lines, paragraphs, value_json, FIXTURE_DIR, SETUP_SQL,
    STREAM, WORKLOAD_SQL,
};
use super::final_rows::FinalRows;

const REGENERATE: &str = "SLOTLINE_REGENERATE_CAPTURES";

fn config(database: &str, replication: bool) -> ConnectionConfig {
    ConnectionConfig {
        user: "postgres".into(),
        database: database.into(),
        password: None,
        application_name: "slotline-captures".into(),
        replication,
        encryption: slotline_core::conn::Encryption::Plain,
        keepalive: None,
    }
}

/// A database whose defaults print values differently from the pinned settings, with the
/// fixture's tables in it.
fn hostile_database(pg: &PgCluster, name: &str) -> String {
    let db = pg.create_database(name);
    pg.psql(
        &db,
        &format!(
            "ALTER DATABASE {db} SET TimeZone = 'Asia/Kolkata'; \
             ALTER DATABASE {db} SET DateStyle = 'SQL, DMY'; \
             ALTER DATABASE {db} SET IntervalStyle = 'sql_standard'"
        ),
    );
    for step in paragraphs(SETUP_SQL) {
        pg.psql(&db, &step);
    }
    db
}

fn run_workload(pg: &PgCluster, db: &str) {
    for step in paragraphs(WORKLOAD_SQL) {
        pg.psql(db, &step);
    }
}

/// Streams the workload through a fresh slot and returns the raw bytes the server sent
/// after `START_REPLICATION`, up to the end marker's Commit.
fn capture(pg: &PgCluster, db: &str) -> Vec<u8> {
    let (mut repl, _) = Driver::connect(pg.port(), config(db, true)).expect("connect");
    let created = repl
        .query("CREATE_REPLICATION_SLOT capture LOGICAL pgoutput (SNAPSHOT 'nothing')")
        .expect("create slot");
    assert!(
        created.iter().all(|e| !matches!(e, Event::QueryError(_))),
        "{created:?}"
    );
    run_workload(pg, db);
    repl.start_recording();
    repl.conn()
        .query(
            "START_REPLICATION SLOT capture LOGICAL 0/0 (proto_version '1', \
             publication_names '\"capture_pub\"', messages 'true')",
        )
        .expect("start replication");
    let mut marker_seen = false;
    loop {
        match repl.next_event().expect("stream event") {
            Event::XLogData(x) => match pgoutput::parse(&x.data).expect("pgoutput") {
                Message::Logical(m) if (m.prefix, m.content) == super::decode::END_MARKER => {
                    marker_seen = true;
                }
                Message::Commit(_) if marker_seen => break,
                _ => {}
            },
            Event::StreamStarted(_) | Event::Keepalive(_) => {}
            other => panic!("unexpected event while streaming: {other:?}"),
        }
    }
    let mut raw = repl.take_recording();
    let end = end_of_marker_transaction(&raw).expect("the recording holds the marker commit");
    raw.truncate(end);
    raw
}

#[test]
fn live_capture_has_the_structure_of_the_committed_fixture() {
    let pg = PgCluster::start();
    let db = hostile_database(&pg, "captures");
    let raw = capture(&pg, &db);
    if std::env::var_os(REGENERATE).is_some() {
        std::fs::write(format!("{FIXTURE_DIR}/pg15-stream.bin"), &raw).expect("write fixture");
        super::seeds::write_all(&raw);
        eprintln!("rewrote the fixture and seeds: review and commit them");
        return;
    }
    let live = json_lines(&frames(&raw, []));
    let fixture = json_lines(&frames(STREAM, []));
    assert_eq!(
        live.join("\n"),
        fixture.join("\n"),
        "the live capture differs from the fixture (regenerate with {REGENERATE}=1 if the \
         workload changed on purpose)"
    );
}

/// `COPY table TO STDOUT` through the pinned `Connection`, each row decoded by `CopyRow`
/// and the fixture relation's value plans: table → key → field values.
fn copy_rows(driver: &mut Driver, rows: &mut FinalRows, table: &str) {
    let events = driver
        .query(&format!("COPY {table} TO STDOUT"))
        .expect("copy");
    let mut row = CopyRow::new();
    for event in &events {
        match event {
            Event::CopyOutData(data) => {
                let mapping = rows.mapping_named(table);
                let width = rows.relation_width(table);
                row.parse(data, width).expect("a COPY row");
                let values = mapping
                    .fields
                    .iter()
                    .filter_map(|field| {
                        let source = field.source.as_ref()?;
                        let datum = match row.field(source.column).expect("column in range") {
                            Some(text) => Datum::Text(text),
                            None => Datum::Null,
                        };
                        Some((
                            field.json_key.clone(),
                            Some(value_json(&source.plan, &datum)),
                        ))
                    })
                    .collect();
                rows.put(table, values);
            }
            Event::QueryError(e) => panic!("COPY {table} failed: {e:?}"),
            _ => {}
        }
    }
}

#[test]
fn copy_decodes_to_the_same_json_as_the_stream_under_hostile_database_defaults() {
    let pg = PgCluster::start();
    let db = hostile_database(&pg, "copy_equivalence");
    run_workload(&pg, &db);

    // An unpinned session renders the same values differently...
    let unpinned = pg.psql(&db, "SELECT tstz, d, iv FROM all_types WHERE id = 1");
    assert_eq!(
        unpinned,
        "10/03/2024 16:04:56.789 IST|29/02/2024|+1-2 +3 +4:05:06.789"
    );
    // ...while the core's connection pins ISO, UTC and the postgres interval style.
    let (mut driver, _) = Driver::connect(pg.port(), config(&db, false)).expect("connect");
    let pinned = slotline_tests::driver::rows(
        &driver
            .query("SELECT tstz, d, iv FROM all_types WHERE id = 1")
            .expect("query"),
    );
    assert_eq!(
        pinned,
        [[
            Some("2024-03-10 10:34:56.789+00".to_owned()),
            Some("2024-02-29".to_owned()),
            Some("1 year 2 mons 3 days 04:05:06.789".to_owned())
        ]]
    );

    let streamed = FinalRows::from_stream(&frames(STREAM, []));
    let keys =
        |rows: &FinalRows, table: &str| rows.table(table).keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&streamed, "all_types"), ["1", "20", "4", "5"]);
    assert_eq!(keys(&streamed, "toast_default"), ["1"]);
    let mut copied = streamed.empty_like();
    for table in ["all_types", "toast_default", "events"] {
        copy_rows(&mut driver, &mut copied, table);
    }
    for table in ["all_types", "toast_default"] {
        assert_eq!(
            copied.table(table),
            streamed.table(table),
            "COPY and pgoutput disagree on {table}"
        );
    }
    // events gained `source DEFAULT 'web'` mid-stream: PostgreSQL fills the default into
    // rows written before the ALTER without streaming anything, so only rows written (or
    // rewritten) after it agree. Rows 2 and 3 show the gap the pipeline cannot see.
    let copied_events = copied.table("events");
    let streamed_events = streamed.table("events");
    let differing: Vec<&String> = copied_events
        .iter()
        .filter(|(key, row)| streamed_events.get(*key) != Some(row))
        .map(|(key, _)| key)
        .collect();
    assert_eq!(
        differing,
        ["2", "3"],
        "{copied_events:#?}\n{streamed_events:#?}"
    );
    driver.close().expect("close");
}
