//! The conversation machine against a real PostgreSQL: authentication methods, pinned
//! session settings, simple queries, COPY OUT and a logical replication stream.

use std::time::Duration;

use slotline_core::config::TcpKeepalive;
use slotline_core::conn::{ConnectionConfig, Event, Password};
use slotline_core::time::PgTime;
use slotline_core::wire::{StatusUpdate, TransactionStatus};
use slotline_core::Lsn;
use slotline_tests::driver::{rows, Driver};
use slotline_tests::pg::{wait_for, PgCluster};

fn config(
    user: &str,
    database: &str,
    password: Option<&str>,
    replication: bool,
) -> ConnectionConfig {
    ConnectionConfig {
        user: user.into(),
        database: database.into(),
        password: password.map(Password::new),
        application_name: "slotline-conn-real".into(),
        replication,
        encryption: slotline_core::conn::Encryption::Plain,
        keepalive: None,
    }
}

/// Puts password rules for two roles above the trust lines and reloads.
fn require_passwords(pg: &PgCluster) {
    let hba = pg.data_dir().join("pg_hba.conf");
    let old = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
    let rules = "host all md5_user 127.0.0.1/32 md5\n\
                 host all scram_user 127.0.0.1/32 scram-sha-256\n";
    std::fs::write(&hba, format!("{rules}{old}")).expect("write pg_hba.conf");
    pg.psql(
        "postgres",
        "SET password_encryption = 'md5'; CREATE ROLE md5_user LOGIN PASSWORD 'md5-secret'; \
         SET password_encryption = 'scram-sha-256'; \
         CREATE ROLE scram_user LOGIN PASSWORD 'scram-secret'; SELECT pg_reload_conf()",
    );
}

fn current_user(driver: &mut Driver) -> String {
    let events = driver.query("SELECT current_user").unwrap();
    rows(&events)[0][0].clone().unwrap()
}

#[test]
fn trust_md5_and_scram_logins_work_and_wrong_passwords_fail_cleanly() {
    let pg = PgCluster::start();
    require_passwords(&pg);
    let port = pg.port();

    let (mut trust, startup) =
        Driver::connect(port, config("postgres", "postgres", None, false)).unwrap();
    assert!(startup.contains(&Event::Authenticated));
    assert_eq!(current_user(&mut trust), "postgres");
    trust.close().unwrap();

    let (mut md5, _) = Driver::connect(
        port,
        config("md5_user", "postgres", Some("md5-secret"), false),
    )
    .unwrap();
    assert_eq!(current_user(&mut md5), "md5_user");
    md5.close().unwrap();

    let (mut scram, _) = Driver::connect(
        port,
        config("scram_user", "postgres", Some("scram-secret"), false),
    )
    .unwrap();
    assert_eq!(current_user(&mut scram), "scram_user");
    scram.close().unwrap();

    for user in ["md5_user", "scram_user"] {
        let err =
            Driver::connect(port, config(user, "postgres", Some("wrong"), false)).unwrap_err();
        assert!(err.contains("28P01"), "{user}: {err}");
        let err = Driver::connect(port, config(user, "postgres", None, false)).unwrap_err();
        assert!(err.contains("no password is configured"), "{user}: {err}");
    }
}

#[test]
fn pinned_settings_queries_and_copy_out_on_a_real_server() {
    let pg = PgCluster::start();
    let db = pg.create_database("conn_real");
    pg.psql(&db, "CREATE TABLE t (id int PRIMARY KEY, name text); INSERT INTO t VALUES (1, 'one'), (2, NULL)");
    let (mut driver, _) = Driver::connect(pg.port(), config("postgres", &db, None, false)).unwrap();

    let params = driver.conn().parameters().clone();
    assert_eq!(params["DateStyle"], "ISO, MDY");
    assert_eq!(params["TimeZone"], "UTC");
    assert_eq!(params["IntervalStyle"], "postgres");
    assert_eq!(params["client_encoding"], "UTF8");
    let events = driver
        .query("SHOW bytea_output; SHOW extra_float_digits; SELECT '2024-01-01 12:00:00+05'::timestamptz")
        .unwrap();
    assert_eq!(
        rows(&events),
        [
            vec![Some("hex".to_owned())],
            vec![Some("3".to_owned())],
            vec![Some("2024-01-01 07:00:00+00".to_owned())]
        ]
    );

    let events = driver.query("SELECT id, name FROM t ORDER BY id").unwrap();
    assert_eq!(
        rows(&events),
        [
            vec![Some("1".into()), Some("one".into())],
            vec![Some("2".into()), None]
        ]
    );
    assert!(events.contains(&Event::CommandComplete {
        tag: "SELECT 2".into()
    }));

    let events = driver.query("SELECT * FROM nope").unwrap();
    assert!(
        matches!(&events[0], Event::QueryError(e) if e.code == "42P01" && e.position == Some(15)),
        "{events:?}"
    );
    assert_eq!(
        events.last(),
        Some(&Event::QueryDone {
            transaction: TransactionStatus::Idle
        })
    );

    let events = driver.query("COPY t TO STDOUT").unwrap();
    let data: Vec<&[u8]> = events
        .iter()
        .filter_map(|e| match e {
            Event::CopyOutData(b) => Some(&b[..]),
            _ => None,
        })
        .collect();
    assert_eq!(data, [&b"1\tone\n"[..], &b"2\t\\N\n"[..]]);
    assert!(events.contains(&Event::CopyOutDone));
    assert!(events.contains(&Event::CommandComplete {
        tag: "COPY 2".into()
    }));
    driver.close().unwrap();
}

/// PostgreSQL takes the keepalive settings from the startup message, on a replication
/// connection as on a plain one; `SHOW` reads them back from the server's own socket.
#[test]
fn keepalive_settings_of_the_startup_message_reach_the_servers_socket() {
    let pg = PgCluster::start();
    let db = pg.create_database("conn_keepalive");
    let keepalive = TcpKeepalive {
        idle_secs: 37,
        interval_secs: 7,
        count: 3,
        user_timeout_ms: Some(12_345),
    };
    for replication in [false, true] {
        let config = ConnectionConfig {
            keepalive: Some(keepalive),
            ..config("postgres", &db, None, replication)
        };
        let (mut driver, _) = Driver::connect(pg.port(), config).unwrap();
        let mut shown = Vec::new();
        for setting in [
            "tcp_keepalives_idle",
            "tcp_keepalives_interval",
            "tcp_keepalives_count",
            "tcp_user_timeout",
        ] {
            let events = driver.query(&format!("SHOW {setting}")).unwrap();
            shown.push(format!("{setting}={:?}", rows(&events)));
        }
        assert_eq!(
            shown,
            [
                r#"tcp_keepalives_idle=[[Some("37")]]"#,
                r#"tcp_keepalives_interval=[[Some("7")]]"#,
                r#"tcp_keepalives_count=[[Some("3")]]"#,
                r#"tcp_user_timeout=[[Some("12345")]]"#,
            ],
            "replication={replication}"
        );
        driver.close().unwrap();
    }
}

/// The pgoutput Commit message's end LSN: 'C', flags, commit LSN, end LSN, time.
fn commit_end_lsn(data: &[u8]) -> Option<Lsn> {
    (data.first() == Some(&b'C') && data.len() == 26)
        .then(|| Lsn(u64::from_be_bytes(data[10..18].try_into().unwrap())))
}

#[test]
fn logical_replication_streams_an_insert_and_stops_cleanly() {
    let pg = PgCluster::start();
    let db = pg.create_database("conn_repl");
    pg.psql(
        &db,
        "CREATE TABLE t (id int PRIMARY KEY, name text); CREATE PUBLICATION p FOR TABLE t",
    );
    let (mut repl, _) = Driver::connect(pg.port(), config("postgres", &db, None, true)).unwrap();

    let events = repl.query("IDENTIFY_SYSTEM").unwrap();
    let system = &rows(&events)[0];
    assert_eq!(system.len(), 4);
    assert_eq!(system[3].as_deref(), Some(db.as_str()));
    let events = repl
        .query("CREATE_REPLICATION_SLOT s LOGICAL pgoutput (SNAPSHOT 'nothing')")
        .unwrap();
    let slot = &rows(&events)[0];
    assert_eq!(slot[0].as_deref(), Some("s"));
    assert_eq!(slot[2], None, "SNAPSHOT 'nothing' exports no snapshot");

    pg.psql(&db, "INSERT INTO t VALUES (1, 'streamed-value')");
    repl.conn()
        .query("START_REPLICATION SLOT s LOGICAL 0/0 (proto_version '1', publication_names 'p')")
        .unwrap();
    let mut payloads = Vec::new();
    let mut end_lsn = None;
    while end_lsn.is_none() {
        match repl.next_event().unwrap() {
            Event::XLogData(x) => {
                end_lsn = commit_end_lsn(&x.data);
                payloads.push(x.data);
            }
            Event::StreamStarted(_) | Event::Keepalive(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    let tags: Vec<u8> = payloads.iter().map(|p| p[0]).collect();
    assert_eq!(tags, b"BRIC");
    assert!(payloads[2].windows(14).any(|w| w == b"streamed-value"));

    let end_lsn = end_lsn.unwrap();
    repl.conn()
        .send_status_update(StatusUpdate {
            write: end_lsn,
            flush: end_lsn,
            apply: end_lsn,
            client_time: PgTime(0),
            reply_requested: false,
        })
        .unwrap();
    repl.conn().finish_stream().unwrap();
    let tail = repl
        .until(|e| matches!(e, Event::QueryDone { .. }))
        .unwrap();
    assert!(tail.contains(&Event::StreamServerDone), "{tail:?}");
    assert!(
        !tail
            .iter()
            .any(|e| matches!(e, Event::Failed(_) | Event::QueryError(_))),
        "{tail:?}"
    );

    let confirmed = wait_for(Duration::from_secs(5), || {
        let text = pg.psql(
            &db,
            "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 's'",
        );
        (text.parse::<Lsn>().ok()? >= end_lsn).then_some(text)
    });
    assert!(
        confirmed.is_some(),
        "confirmed_flush_lsn never reached {end_lsn}"
    );

    // The connection is usable again after the stream, then closes cleanly.
    assert_eq!(
        rows(&repl.query("SELECT 1").unwrap()),
        [vec![Some("1".to_owned())]]
    );
    repl.close().unwrap();
}

/// PostgreSQL does not check a status update's flush position against its own WAL: a
/// position 1 GiB past its end becomes the slot's `confirmed_flush_lsn`. Nothing on the
/// server stops a client from reporting an earlier slot's position to a new one, which is
/// why a session's acknowledgement history starts at its slot's own position
/// (`AckTracker::start_from_slot`).
#[test]
fn postgresql_takes_a_flush_position_beyond_its_own_wal_end() {
    let pg = PgCluster::start();
    let db = pg.create_database("conn_beyond");
    pg.psql(
        &db,
        "CREATE TABLE t (id int PRIMARY KEY); CREATE PUBLICATION p FOR TABLE t",
    );
    let (mut repl, _) = Driver::connect(pg.port(), config("postgres", &db, None, true)).unwrap();
    let events = repl
        .query("CREATE_REPLICATION_SLOT s LOGICAL pgoutput (SNAPSHOT 'nothing')")
        .unwrap();
    let created: Lsn = rows(&events)[0][1].clone().unwrap().parse().unwrap();
    repl.conn()
        .query("START_REPLICATION SLOT s LOGICAL 0/0 (proto_version '1', publication_names 'p')")
        .unwrap();
    repl.until(|e| matches!(e, Event::StreamStarted(_)))
        .unwrap();
    let beyond = Lsn(created.0 + (1 << 30));
    repl.conn()
        .send_status_update(StatusUpdate {
            write: beyond,
            flush: beyond,
            apply: beyond,
            client_time: PgTime(0),
            reply_requested: false,
        })
        .unwrap();
    repl.conn().finish_stream().unwrap();
    repl.until(|e| matches!(e, Event::QueryDone { .. }))
        .unwrap();
    repl.close().unwrap();
    let confirmed: Lsn = pg
        .psql(
            &db,
            "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 's'",
        )
        .parse()
        .unwrap();
    let wal: Lsn = pg.psql(&db, "SELECT pg_current_wal_lsn()").parse().unwrap();
    println!("created {created}, reported {beyond}, confirmed {confirmed}, wal {wal}");
    assert_eq!(confirmed, beyond, "created {created}, wal {wal}");
}
