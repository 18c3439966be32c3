use super::*;

fn base() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "PG_URL",
            "postgres://slot:s3cret@db.example:5433/app?sslmode=require",
        ),
        ("PG_PUBLICATION", "pub"),
        ("TABLES", "users,items"),
        ("FELDERA_PIPELINE", "orders-prod"),
    ]
}

fn with(extra: &[(&'static str, &'static str)]) -> Result<Config, ConfigError> {
    let mut pairs = base();
    for (k, v) in extra {
        pairs.retain(|(key, _)| key != k);
        pairs.push((k, v));
    }
    Config::from_pairs(pairs)
}

fn error(extra: &[(&'static str, &'static str)]) -> String {
    with(extra).unwrap_err().to_string()
}

#[test]
fn defaults_follow_the_design_table() {
    let c = with(&[]).unwrap();
    assert_eq!(c.slot, "slotline_orders_prod");
    assert_eq!(c.feldera_url, "http://127.0.0.1:8080");
    assert_eq!(c.ack_mode, AckMode::Completed);
    assert!(c.require_primary_key);
    assert_eq!(c.completion_timeout_ms, 60_000);
    assert_eq!(c.snapshot_mode, SnapshotMode::Initial);
    assert_eq!(c.state_dir, "./slotline-state");
    assert_eq!(
        (c.batch_max_rows, c.batch_max_bytes, c.batch_linger_ms),
        (10_000, 4_194_304, 50)
    );
    assert_eq!(c.max_in_flight_batches, 4);
    assert_eq!(c.feldera_transactions, FelderaTransactions::Off);
    assert_eq!(c.feldera_durability, FelderaDurability::Auto);
    assert_eq!(c.feldera_checkpoint_interval_secs, 60);
    assert_eq!(c.feldera_restart, FelderaRestart::Resnapshot);
    assert_eq!(c.no_progress_timeout_secs, 300);
    assert_eq!(c.shutdown_confirm_ms, 5000);
    assert_eq!(c.log_format, LogFormat::Text);
    assert_eq!(c.crash, None);
    assert_eq!(c.tables, TablesSpec::List("users,items".into()));
}

#[test]
fn pg_url_gives_every_connection_part() {
    let pg = with(&[]).unwrap().pg;
    assert_eq!(
        (
            pg.host.as_str(),
            pg.port,
            pg.user.as_str(),
            pg.database.as_str()
        ),
        ("db.example", 5433, "slot", "app")
    );
    assert_eq!(pg.password.as_ref().map(Secret::expose), Some("s3cret"));
    assert_eq!(pg.sslmode, SslMode::Require);
}

#[test]
fn pg_url_percent_encoding_is_decoded() {
    let pg = with(&[("PG_URL", "postgresql://us%40er:p%2Fw%3A@[::1]/my%20db")])
        .unwrap()
        .pg;
    assert_eq!(
        (
            pg.user.as_str(),
            pg.host.as_str(),
            pg.port,
            pg.database.as_str()
        ),
        ("us@er", "::1", 5432, "my db")
    );
    assert_eq!(pg.password.unwrap().expose(), "p/w:");
}

#[test]
fn conninfo_key_value_form_with_quotes() {
    let pg = with(&[(
        "PG_URL",
        r"host=h port=6000 user=u dbname='my db' password='it\'s'",
    )])
    .unwrap()
    .pg;
    assert_eq!(
        (pg.host.as_str(), pg.port, pg.database.as_str()),
        ("h", 6000, "my db")
    );
    assert_eq!(pg.password.unwrap().expose(), "it's");
}

#[test]
fn libpq_variables_are_used_without_pg_url() {
    let c = Config::from_pairs([
        ("PGHOST", "10.0.0.5"),
        ("PGPORT", "5444"),
        ("PGUSER", "repl"),
        ("PGPASSWORD", "pw"),
        ("PG_PUBLICATION", "p"),
        ("PG_TABLE", "public.users"),
        ("FELDERA_TABLE", "USERS"),
        ("FELDERA_PIPELINE", "x"),
    ])
    .unwrap();
    assert_eq!(
        (c.pg.host.as_str(), c.pg.port, c.pg.database.as_str()),
        ("10.0.0.5", 5444, "repl")
    );
    assert_eq!(c.pg.sslmode, SslMode::Prefer);
    assert_eq!(
        c.tables,
        TablesSpec::Single {
            pg_table: "public.users".into(),
            feldera_table: Some("USERS".into())
        }
    );
}

#[test]
fn secrets_never_appear_in_debug_or_errors() {
    let c = with(&[("FELDERA_API_KEY", "apikey-123")]).unwrap();
    let debug = format!("{c:?}");
    assert!(
        !debug.contains("s3cret") && !debug.contains("apikey-123"),
        "{debug}"
    );
    let err = error(&[("PG_URL", "postgres://u:hunter2@h:0/db")]);
    assert!(!err.contains("hunter2"), "{err}");
    assert!(err.contains("1 to 65535"), "{err}");
    let err = error(&[("PG_URL", "postgres://u:hunter2@h:99999/db")]);
    assert!(
        !err.contains("hunter2") && err.contains("postgres://user[:password]@host"),
        "{err}"
    );
}

#[test]
fn errors_name_variable_value_and_what_is_accepted() {
    insta::assert_snapshot!(error(&[("BATCH_MAX_ROWS", "ten")]), @r#"BATCH_MAX_ROWS="ten" is invalid: a whole number from 1 to 100000"#);
    insta::assert_snapshot!(error(&[("FELDERA_ACK_MODE", "sometimes")]), @r#"FELDERA_ACK_MODE="sometimes" is invalid: one of completed, accepted"#);
    insta::assert_snapshot!(error(&[("SNAPSHOT_MODE", "full")]), @r#"SNAPSHOT_MODE="full" is invalid: one of initial, never, inconsistent"#);
    insta::assert_snapshot!(error(&[("FELDERA_REQUIRE_PRIMARY_KEY", "maybe")]), @r#"FELDERA_REQUIRE_PRIMARY_KEY="maybe" is invalid: true or false (also 1/0, yes/no, on/off)"#);
    insta::assert_snapshot!(error(&[("PG_SLOT", "My-Slot")]), @r#"PG_SLOT="My-Slot" is invalid: 1 to 63 characters from a-z, 0-9 and _ (PostgreSQL's rule for replication slot names)"#);
    insta::assert_snapshot!(error(&[("FELDERA_URL", "ftp://x")]), @r#"FELDERA_URL="ftp://x" is invalid: the scheme is ftp; accepted: an http:// or https:// URL with a host and neither query nor fragment, like http://127.0.0.1:8080"#);
    insta::assert_snapshot!(error(&[("CRASH_AT", "midway")]), @r#"CRASH_AT="midway" is invalid: one of before_send, after_send, after_complete, after_ack, snapshot_after_slot, snapshot_mid_copy, snapshot_before_complete, retract_after_query, retract_mid_delete"#);
    insta::assert_snapshot!(error(&[("LOG_FORMAT", "xml")]), @r#"LOG_FORMAT="xml" is invalid: one of text, json"#);
}

#[test]
fn batch_max_rows_past_what_a_feldera_ingress_endpoint_queues_is_refused_with_the_reason() {
    assert_eq!(
        with(&[("BATCH_MAX_ROWS", "100000"), ("MAX_IN_FLIGHT_BATCHES", "1")])
            .unwrap()
            .batch_max_rows,
        100_000
    );
    let err = with(&[("BATCH_MAX_ROWS", "100001")]).unwrap_err();
    assert_eq!(err.variable, "BATCH_MAX_ROWS");
    insta::assert_snapshot!(err.to_string(), @r#"BATCH_MAX_ROWS="100001" is invalid: a whole number from 1 to 100000 (Feldera pauses an ingress endpoint holding 100000 queued records, so a larger batch can stall half-read until Feldera's manager answers 503 after 30 s with part of it taken)"#);
    assert!(
        error(&[("BATCH_MAX_ROWS", "0")]).ends_with("a whole number from 1 to 100000"),
        "below the range needs no Feldera reason"
    );
}

#[test]
fn required_options_are_named_when_missing() {
    let err = Config::from_pairs([
        ("PG_URL", "postgres://u@h/d"),
        ("TABLES", "t"),
        ("PG_PUBLICATION", "p"),
    ])
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "FELDERA_PIPELINE is required: the name of the Feldera pipeline to feed"
    );
    let err = Config::from_pairs([
        ("PG_URL", "postgres://u@h/d"),
        ("FELDERA_PIPELINE", "p"),
        ("TABLES", "t"),
    ])
    .unwrap_err();
    assert_eq!(err.variable, "PG_PUBLICATION");
    let err = Config::from_pairs([
        ("PG_URL", "postgres://u@h/d"),
        ("FELDERA_PIPELINE", "p"),
        ("PG_PUBLICATION", "x"),
    ])
    .unwrap_err();
    assert_eq!(err.variable, "TABLES");
}

#[test]
fn tables_and_pg_table_are_exclusive() {
    assert!(error(&[("PG_TABLE", "users")]).contains("not both"));
    let pairs = base()
        .into_iter()
        .filter(|(k, _)| *k != "TABLES")
        .chain([("FELDERA_TABLE", "x")]);
    assert_eq!(Config::from_pairs(pairs).unwrap_err().variable, "PG_TABLE");
}

#[test]
fn unknown_options_are_refused_not_ignored() {
    let mut pairs = base();
    pairs.push(("BATCH_MAX_ROW", "5"));
    let err = Config::from_pairs(pairs).unwrap_err();
    assert_eq!(err.variable, "BATCH_MAX_ROW");
    assert!(err.to_string().contains("BATCH_MAX_ROWS"));
}

#[test]
fn crash_injection_is_parsed() {
    let c = with(&[("CRASH_AT", "after_send"), ("CRASH_AFTER_BATCHES", "3")]).unwrap();
    assert_eq!(
        c.crash,
        Some(CrashSpec {
            point: CrashPoint::AfterSend,
            after: 3
        })
    );
    assert!(error(&[("CRASH_AT", "after_send"), ("CRASH_AFTER_BATCHES", "0")]).contains("from 1"));
}

#[test]
fn snapshot_workers_and_retract_page_rows_default_and_bounds() {
    let c = with(&[]).unwrap();
    assert_eq!((c.snapshot_workers, c.retract_page_rows), (4, 10_000));
    let c = with(&[("SNAPSHOT_WORKERS", "64"), ("RETRACT_PAGE_ROWS", "1")]).unwrap();
    assert_eq!((c.snapshot_workers, c.retract_page_rows), (64, 1));
    let c = with(&[("SNAPSHOT_WORKERS", "1"), ("RETRACT_PAGE_ROWS", "1000000")]).unwrap();
    assert_eq!((c.snapshot_workers, c.retract_page_rows), (1, 1_000_000));
    insta::assert_snapshot!(error(&[("SNAPSHOT_WORKERS", "0")]), @r#"SNAPSHOT_WORKERS="0" is invalid: a whole number from 1 to 64"#);
    insta::assert_snapshot!(error(&[("SNAPSHOT_WORKERS", "65")]), @r#"SNAPSHOT_WORKERS="65" is invalid: a whole number from 1 to 64"#);
    assert_eq!(with(&[]).unwrap().copy_chunk_rows, 10_000);
    assert_eq!(
        with(&[("COPY_CHUNK_ROWS", "1")]).unwrap().copy_chunk_rows,
        1
    );
    insta::assert_snapshot!(error(&[("COPY_CHUNK_ROWS", "0")]), @r#"COPY_CHUNK_ROWS="0" is invalid: a whole number from 1 to 1000000"#);
    insta::assert_snapshot!(error(&[("RETRACT_PAGE_ROWS", "0")]), @r#"RETRACT_PAGE_ROWS="0" is invalid: a whole number from 1 to 1000000"#);
    insta::assert_snapshot!(error(&[("RETRACT_PAGE_ROWS", "1000001")]), @r#"RETRACT_PAGE_ROWS="1000001" is invalid: a whole number from 1 to 1000000"#);
    insta::assert_snapshot!(error(&[("RETRACT_PAGE_ROWS", "10k")]), @r#"RETRACT_PAGE_ROWS="10k" is invalid: a whole number from 1 to 1000000"#);
}

#[test]
fn the_query_timeout_defaults_to_ten_minutes_and_is_bounded() {
    assert_eq!(with(&[]).unwrap().query_timeout_secs, 600);
    assert_eq!(
        with(&[("QUERY_TIMEOUT_SECS", "86400")])
            .unwrap()
            .query_timeout_secs,
        86_400
    );
    insta::assert_snapshot!(error(&[("QUERY_TIMEOUT_SECS", "0")]), @r#"QUERY_TIMEOUT_SECS="0" is invalid: a whole number from 1 to 86400"#);
    insta::assert_snapshot!(error(&[("QUERY_TIMEOUT_SECS", "86401")]), @r#"QUERY_TIMEOUT_SECS="86401" is invalid: a whole number from 1 to 86400"#);
}

#[test]
fn in_flight_window_and_feldera_transactions_are_read_and_checked() {
    let c = with(&[
        ("MAX_IN_FLIGHT_BATCHES", "64"),
        ("BATCH_MAX_ROWS", "781"),
        ("FELDERA_TRANSACTIONS", "Large"),
    ])
    .unwrap();
    assert_eq!(
        (c.max_in_flight_batches, c.feldera_transactions),
        (64, FelderaTransactions::Large)
    );
    let c = with(&[
        ("MAX_IN_FLIGHT_BATCHES", "1"),
        ("FELDERA_TRANSACTIONS", "all"),
    ])
    .unwrap();
    assert_eq!(
        (c.max_in_flight_batches, c.feldera_transactions),
        (1, FelderaTransactions::All)
    );
    insta::assert_snapshot!(error(&[("MAX_IN_FLIGHT_BATCHES", "0")]), @r#"MAX_IN_FLIGHT_BATCHES="0" is invalid: a whole number from 1 to 64"#);
    insta::assert_snapshot!(error(&[("MAX_IN_FLIGHT_BATCHES", "65")]), @r#"MAX_IN_FLIGHT_BATCHES="65" is invalid: a whole number from 1 to 64"#);
    insta::assert_snapshot!(error(&[("FELDERA_TRANSACTIONS", "yes")]), @r#"FELDERA_TRANSACTIONS="yes" is invalid: one of off, large, all"#);
}

#[test]
fn a_window_of_batches_past_half_an_ingress_endpoint_s_queue_is_refused() {
    let fits = with(&[("MAX_IN_FLIGHT_BATCHES", "5"), ("BATCH_MAX_ROWS", "10000")]).unwrap();
    assert_eq!(
        (fits.max_in_flight_batches, fits.batch_max_rows),
        (5, 10_000)
    );
    let err = with(&[("MAX_IN_FLIGHT_BATCHES", "6"), ("BATCH_MAX_ROWS", "10000")]).unwrap_err();
    assert_eq!(err.variable, "MAX_IN_FLIGHT_BATCHES");
    insta::assert_snapshot!(err.to_string(), @r#"MAX_IN_FLIGHT_BATCHES="6" is invalid: at most 5 with BATCH_MAX_ROWS=10000: the batches in flight would carry up to 60000 records for one table, and Feldera pauses an ingress endpoint holding 100000 queued records, some of which an ended session's requests may have left, until its manager answers 503 after 30 s; keep MAX_IN_FLIGHT_BATCHES x BATCH_MAX_ROWS at or below 50000"#);
    // The default window (4) with a batch too big for it.
    let err = with(&[("BATCH_MAX_ROWS", "20000")]).unwrap_err();
    assert!(
        err.to_string()
            .contains("at most 2 with BATCH_MAX_ROWS=20000"),
        "{err}"
    );
    // One batch in flight is bounded by BATCH_MAX_ROWS alone.
    assert!(with(&[("MAX_IN_FLIGHT_BATCHES", "1"), ("BATCH_MAX_ROWS", "100000")]).is_ok());
}

#[test]
fn durability_checkpoint_interval_and_restart_are_read_and_checked() {
    let c = with(&[
        ("FELDERA_DURABILITY", "Checkpoint"),
        ("FELDERA_CHECKPOINT_INTERVAL_SECS", "1"),
        ("FELDERA_RESTART", "exit"),
    ])
    .unwrap();
    assert_eq!(
        (
            c.feldera_durability,
            c.feldera_checkpoint_interval_secs,
            c.feldera_restart
        ),
        (FelderaDurability::Checkpoint, 1, FelderaRestart::Exit)
    );
    let c = with(&[
        ("FELDERA_DURABILITY", "completion"),
        ("FELDERA_CHECKPOINT_INTERVAL_SECS", "3600"),
        ("FELDERA_RESTART", "RESNAPSHOT"),
    ])
    .unwrap();
    assert_eq!(
        (
            c.feldera_durability,
            c.feldera_checkpoint_interval_secs,
            c.feldera_restart
        ),
        (
            FelderaDurability::Completion,
            3600,
            FelderaRestart::Resnapshot
        )
    );
    insta::assert_snapshot!(error(&[("FELDERA_DURABILITY", "stored")]), @r#"FELDERA_DURABILITY="stored" is invalid: one of auto, checkpoint, completion"#);
    insta::assert_snapshot!(error(&[("FELDERA_CHECKPOINT_INTERVAL_SECS", "0")]), @r#"FELDERA_CHECKPOINT_INTERVAL_SECS="0" is invalid: a whole number from 1 to 3600"#);
    insta::assert_snapshot!(error(&[("FELDERA_CHECKPOINT_INTERVAL_SECS", "3601")]), @r#"FELDERA_CHECKPOINT_INTERVAL_SECS="3601" is invalid: a whole number from 1 to 3600"#);
    insta::assert_snapshot!(error(&[("FELDERA_CHECKPOINT_INTERVAL_SECS", "1m")]), @r#"FELDERA_CHECKPOINT_INTERVAL_SECS="1m" is invalid: a whole number from 1 to 3600"#);
    insta::assert_snapshot!(error(&[("FELDERA_RESTART", "ignore")]), @r#"FELDERA_RESTART="ignore" is invalid: one of resnapshot, exit"#);
}

#[test]
fn checkpoint_durability_refuses_acknowledging_on_acceptance() {
    let refused = with(&[
        ("FELDERA_DURABILITY", "checkpoint"),
        ("FELDERA_ACK_MODE", "accepted"),
    ])
    .unwrap_err();
    assert_eq!(refused.variable, "FELDERA_DURABILITY");
    insta::assert_snapshot!(refused, @r#"FELDERA_DURABILITY="checkpoint" is invalid: not checkpoint together with FELDERA_ACK_MODE=accepted: that acknowledges what Feldera only accepted, and a checkpoint cannot hold what was not processed yet; use FELDERA_ACK_MODE=completed, or FELDERA_DURABILITY=auto or completion"#);
    // The unsafe mode stays available where it was: with auto or completion durability.
    for durability in ["auto", "completion"] {
        let c = with(&[
            ("FELDERA_DURABILITY", durability),
            ("FELDERA_ACK_MODE", "accepted"),
        ])
        .unwrap();
        assert_eq!(c.ack_mode, AckMode::Accepted);
    }
}

#[test]
fn default_slot_name_is_a_valid_slot_name() {
    let long: &'static str = "P".repeat(100).leak();
    let c = with(&[("FELDERA_PIPELINE", long)]).unwrap();
    assert_eq!(c.slot.len(), 63);
    assert!(parse::slot_name("PG_SLOT", &c.slot).is_ok());
}

#[test]
fn empty_values_count_as_unset() {
    let c = with(&[("BATCH_LINGER_MS", "")]).unwrap();
    assert_eq!(c.batch_linger_ms, 50);
}

#[test]
fn tls_settings_come_from_pg_url_in_both_forms() {
    let pg = with(&[(
        "PG_URL",
        "postgres://u@db/app?sslmode=verify-full&sslrootcert=/ca.pem&sslcert=/c.pem&sslkey=/k.pem",
    )])
    .unwrap()
    .pg;
    assert_eq!(pg.sslmode, SslMode::VerifyFull);
    assert_eq!(pg.sslrootcert, Some(RootCert::File("/ca.pem".into())));
    assert_eq!(
        (pg.sslcert.as_deref(), pg.sslkey.as_deref()),
        (Some("/c.pem"), Some("/k.pem"))
    );
    let pg = with(&[(
        "PG_URL",
        "host=db user=u sslmode=verify-ca sslrootcert='/my ca.pem' connect_timeout=10",
    )])
    .unwrap()
    .pg;
    assert_eq!(pg.sslmode, SslMode::VerifyCa);
    assert_eq!(pg.sslrootcert, Some(RootCert::File("/my ca.pem".into())));
    assert_eq!(pg.connect_timeout_ms, Some(10_000));
}

#[test]
fn tls_settings_come_from_the_libpq_variables_without_pg_url() {
    let pg = Config::from_pairs([
        ("PGHOST", "db"),
        ("PGUSER", "u"),
        ("PGSSLMODE", "allow"),
        ("PGSSLROOTCERT", "system"),
        ("PGSSLMODE", "verify-full"),
        ("PGSSLCERT", "/c.pem"),
        ("PGSSLKEY", "/k.pem"),
        ("PGCONNECT_TIMEOUT", "1"),
        ("PGPASSFILE", "/etc/pgpass"),
        ("PG_PUBLICATION", "p"),
        ("TABLES", "t"),
        ("FELDERA_PIPELINE", "x"),
    ])
    .unwrap()
    .pg;
    assert_eq!(pg.sslmode, SslMode::VerifyFull);
    assert_eq!(pg.sslrootcert, Some(RootCert::System));
    assert_eq!(
        pg.connect_timeout_ms,
        Some(2_000),
        "libpq raises 1 s to 2 s"
    );
    assert_eq!(pg.passfile, Some(PassFile::Path("/etc/pgpass".into())));
    assert_eq!(pg.setting_name("sslcert"), "PGSSLCERT");
}

#[test]
fn system_roots_default_to_verify_full_and_refuse_weaker_modes() {
    let url = |query: &'static str| -> Result<Config, ConfigError> {
        let url: &'static str = format!("postgres://u@db/app?{query}").leak();
        with(&[("PG_URL", url)])
    };
    assert_eq!(
        url("sslrootcert=system").unwrap().pg.sslmode,
        SslMode::VerifyFull
    );
    let err = url("sslrootcert=system&sslmode=require").unwrap_err();
    assert_eq!(err.variable, "sslmode in PG_URL");
    assert!(err.accepted.contains("verify-full"), "{err}");
}

#[test]
fn libpq_variables_fill_what_pg_url_leaves_unset_and_are_named_for_it() {
    let config = with(&[
        ("PG_URL", "postgres://u@db/app?sslmode=disable"),
        ("PGPASSWORD", "from-env"),
        ("PGSSLMODE", "require"),
        ("PGPASSFILE", "/etc/pgpass"),
    ])
    .unwrap();
    assert_eq!(
        config.pg.password.as_ref().map(|p| p.expose()),
        Some("from-env")
    );
    assert_eq!(config.pg.sslmode, SslMode::Disable, "the URL wins");
    assert_eq!(config.pg.passfile, None, "a password is configured");
    let err = with(&[
        ("PG_URL", "postgres://u@db/app"),
        ("PGCONNECT_TIMEOUT", "soon"),
    ])
    .unwrap_err();
    assert_eq!(err.variable, "PGCONNECT_TIMEOUT");
    assert_eq!(
        err.value.as_deref(),
        Some("soon"),
        "a variable's value is shown"
    );
}

#[test]
fn verifying_modes_need_a_root_certificate_and_name_where_it_goes() {
    let err = with(&[("PG_URL", "postgres://u@db/app?sslmode=verify-ca")]).unwrap_err();
    assert_eq!(err.variable, "sslrootcert (in PG_URL, or PGSSLROOTCERT)");
    let err = Config::from_pairs([
        ("PGUSER", "u"),
        ("PGSSLMODE", "verify-full"),
        ("PG_PUBLICATION", "p"),
        ("TABLES", "t"),
        ("FELDERA_PIPELINE", "x"),
    ])
    .unwrap_err();
    insta::assert_snapshot!(err.to_string(), @"PGSSLROOTCERT is required: sslmode=verify-full verifies the server's certificate: give the CA certificates as a PEM file, or `system` for the platform's trusted roots");
}

#[test]
fn a_client_certificate_needs_its_key_and_the_key_its_certificate() {
    let err = with(&[("PG_URL", "postgres://u@db/app?sslcert=/c.pem")]).unwrap_err();
    assert_eq!(err.variable, "sslkey (in PG_URL, or PGSSLKEY)");
    let err = with(&[("PG_URL", "postgres://u@db/app?sslkey=/k.pem")]).unwrap_err();
    assert_eq!(err.variable, "sslcert (in PG_URL, or PGSSLCERT)");
}

#[test]
fn sslmode_errors_name_what_the_user_set() {
    let err = with(&[("PG_URL", "postgres://u@db/app?sslmode=maybe")]).unwrap_err();
    assert_eq!(err.variable, "sslmode in PG_URL");
    assert!(err.accepted.contains("allow"), "{err}");
    let err = Config::from_pairs([
        ("PGUSER", "u"),
        ("PGSSLMODE", "on"),
        ("FELDERA_PIPELINE", "x"),
        ("PG_PUBLICATION", "p"),
        ("TABLES", "t"),
    ])
    .unwrap_err();
    assert_eq!(err.variable, "PGSSLMODE");
}

#[test]
fn connect_timeout_follows_libpq() {
    let timeout = |raw: &'static str| {
        let url: &'static str = format!("host=db user=u connect_timeout={raw}").leak();
        with(&[("PG_URL", url)]).map(|c| c.pg.connect_timeout_ms)
    };
    assert_eq!(timeout("0"), Ok(None), "0 waits for ever");
    assert_eq!(timeout("-5"), Ok(None));
    assert_eq!(timeout("1"), Ok(Some(2_000)));
    assert_eq!(timeout("30"), Ok(Some(30_000)));
    assert_eq!(
        timeout("soon").unwrap_err().variable,
        "connect_timeout in PG_URL"
    );
    assert!(timeout("100000").is_err());
}

#[test]
fn unix_socket_directories_are_hosts_in_both_forms() {
    let pg = with(&[("PG_URL", "postgres://u@%2Fvar%2Frun%2Fpostgresql:5433/app")])
        .unwrap()
        .pg;
    assert_eq!(pg.host, "/var/run/postgresql");
    assert!(pg.is_unix_socket());
    let pg = with(&[("PG_URL", "postgres:///app?host=/tmp&user=u")])
        .unwrap()
        .pg;
    assert_eq!((pg.host.as_str(), pg.port), ("/tmp", 5432));
}

#[test]
fn the_password_file_fills_in_only_a_missing_password() {
    let mut pg = with(&[("PG_URL", "postgres://slot@db.example:5433/app")])
        .unwrap()
        .pg;
    assert_eq!(pg.passfile, Some(PassFile::Default));
    assert!(pg.apply_passfile("db.example:5433:app:slot:from-file\n"));
    assert_eq!(pg.password.as_ref().map(Secret::expose), Some("from-file"));
    let pg = with(&[]).unwrap().pg;
    assert_eq!(pg.passfile, None, "a configured password wins");
    let mut socket = with(&[("PG_URL", "postgres://slot@%2Ftmp/app")])
        .unwrap()
        .pg;
    assert!(socket.apply_passfile("localhost:5432:app:slot:local\n"));
    assert_eq!(socket.password.unwrap().expose(), "local");
}

#[test]
fn feldera_ca_cert_is_taken_as_given() {
    let c = with(&[("FELDERA_CA_CERT", "/etc/feldera-ca.pem")]).unwrap();
    assert_eq!(c.feldera_ca_cert.as_deref(), Some("/etc/feldera-ca.pem"));
}

/// The message a start with `extra` is refused with, whether the configuration or the
/// pipeline built from it refuses it.
fn refusal(extra: &[(&'static str, &'static str)]) -> String {
    let config = match with(extra) {
        Ok(config) => config,
        Err(e) => return e.to_string(),
    };
    let now = crate::time::Now::default();
    match crate::pipeline::Pipeline::new(config, 1, now) {
        Ok(_) => panic!("{extra:?} was accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_malformed_tables_value_is_invalid_naming_it_never_required() {
    insta::assert_snapshot!(refusal(&[("TABLES", "users,users")]), @r#"TABLES="users,users" is invalid: PostgreSQL table public.users is routed twice; accepted: each PostgreSQL table and each Feldera table in one route at most"#);
    let comma = refusal(&[("TABLES", ",")]);
    assert!(
        comma.starts_with(r#"TABLES="," is invalid: item 1 of `,` is empty; accepted: "#),
        "{comma}"
    );
    let dotted = refusal(&[("TABLES", "a.b.c")]);
    assert!(
        dotted.starts_with(r#"TABLES="a.b.c" is invalid: item 1 `a.b.c`: more than one `.`"#),
        "{dotted}"
    );
    for message in [&comma, &dotted] {
        assert!(!message.contains("required"), "{message}");
    }
}

#[test]
fn a_malformed_pg_table_or_feldera_table_names_the_one_set() {
    let pg_table = |extra: &[(&'static str, &'static str)]| {
        let mut pairs: Vec<(&str, &str)> =
            base().into_iter().filter(|(k, _)| *k != "TABLES").collect();
        pairs.extend_from_slice(extra);
        let config = Config::from_pairs(pairs).expect("valid configuration");
        crate::pipeline::Pipeline::new(config, 1, crate::time::Now::default())
            .expect_err("refused")
            .to_string()
    };
    let message = pg_table(&[("PG_TABLE", "a.b.c")]);
    assert!(
        message.starts_with(r#"PG_TABLE="a.b.c" is invalid: `a.b.c`: more than one `.`"#),
        "{message}"
    );
    let message = pg_table(&[("PG_TABLE", "users"), ("FELDERA_TABLE", "a.b")]);
    assert!(
        message.starts_with(r#"FELDERA_TABLE="a.b" is invalid: `a.b`: "#),
        "{message}"
    );
}

#[test]
fn a_bad_api_key_is_named_but_never_shown() {
    let message = refusal(&[("FELDERA_API_KEY", "two words")]);
    insta::assert_snapshot!(message, @r#"FELDERA_API_KEY="(not shown)" is invalid: the API key is empty or contains spaces or control characters; accepted: a Feldera API key (printable characters, no spaces), or leave it unset"#);
}

#[test]
fn secret_values_are_masked_in_every_configuration_error() {
    for variable in ["PGPASSWORD", "FELDERA_API_KEY", "PG_URL"] {
        let e = ConfigError::new(variable, Some("hunter2"), "anything");
        assert!(!e.to_string().contains("hunter2"), "{e}");
        assert!(e.to_string().starts_with(variable), "{e}");
    }
    let described = ConfigError::new(
        "PG_URL",
        Some("(not shown: it may contain a password)"),
        "x",
    );
    assert_eq!(
        described.value.as_deref(),
        Some("(not shown: it may contain a password)")
    );
}

#[test]
fn a_feldera_url_with_credentials_names_the_variable_without_echoing_them() {
    let message = refusal(&[("FELDERA_URL", "http://admin:hunter2@feldera:8080")]);
    assert!(!message.contains("hunter2"), "{message}");
    insta::assert_snapshot!(message, @r#"FELDERA_URL="(contains credentials)" is invalid: a URL without user or password; put the API key in FELDERA_API_KEY"#);
}

#[test]
fn an_unknown_option_is_not_an_option_rather_than_required() {
    let mut pairs = base();
    pairs.push(("SNAPSHOT_MOD", "never"));
    let message = Config::from_pairs(pairs).unwrap_err().to_string();
    assert!(
        message.starts_with("SNAPSHOT_MOD is not an option: known options: PG_URL, "),
        "{message}"
    );
    assert!(message.contains("SNAPSHOT_MODE"), "{message}");
}

#[test]
fn settings_inside_pg_url_are_named_as_such_with_their_value_but_no_password() {
    let port = error(&[("PG_URL", "postgres://u:hunter2@db:0/app")]);
    insta::assert_snapshot!(port, @r#"port in PG_URL="0" is invalid: a TCP port from 1 to 65535"#);
    let port = error(&[("PG_URL", "host=db port=http user=u password=hunter2")]);
    insta::assert_snapshot!(port, @r#"port in PG_URL="http" is invalid: a TCP port from 1 to 65535"#);
    let port = error(&[("PG_URL", ""), ("PGUSER", "u"), ("PGPORT", "99999")]);
    insta::assert_snapshot!(port, @r#"PGPORT="99999" is invalid: a TCP port from 1 to 65535"#);
    let timeout = error(&[("PG_URL", "postgres://u@db/app?connect_timeout=soon")]);
    assert!(
        timeout.starts_with(r#"connect_timeout in PG_URL="soon" is invalid"#),
        "{timeout}"
    );
}

#[test]
fn an_unknown_pg_url_parameter_is_named_with_the_one_it_is_closest_to_and_no_url() {
    let typo = error(&[("PG_URL", "postgres://u:hunter2@db/app?sslmod=require")]);
    insta::assert_snapshot!(typo, @r#"PG_URL has an unknown parameter "sslmod": did you mean sslmode? accepted: host, hostaddr, port, user, password, dbname, sslmode, sslrootcert, sslcert, sslkey, connect_timeout, passfile, target_session_attrs, keepalives, keepalives_idle, keepalives_interval, keepalives_count, tcp_user_timeout, application_name"#);
    let conninfo = error(&[("PG_URL", "host=db user=u password=hunter2 dbnam=app")]);
    assert!(
        conninfo.starts_with(
            r#"PG_URL has an unknown parameter "dbnam": did you mean dbname? accepted: host, "#
        ),
        "{conninfo}"
    );
    // Nothing close: no guess.
    let far = error(&[("PG_URL", "postgres://u@db/app?load_balance_hosts=random")]);
    assert!(
        far.starts_with(
            r#"PG_URL has an unknown parameter "load_balance_hosts": accepted: host, "#
        ),
        "{far}"
    );
    for message in [&typo, &conninfo, &far] {
        assert!(
            !message.contains("hunter2") && !message.contains("db/app"),
            "{message}"
        );
    }
}

#[test]
fn a_typo_is_matched_to_the_one_known_name_within_two_edits() {
    use super::input::closest;
    let known = ["sslmode", "sslcert", "sslkey", "host", "port", "user"];
    assert_eq!(closest("sslmod", &known), Some("sslmode"));
    assert_eq!(closest("SSLMODE", &known), Some("sslmode"));
    assert_eq!(closest("slmode", &known), Some("sslmode"));
    assert_eq!(closest("sslkye", &known), Some("sslkey"));
    assert_eq!(
        closest("hots", &known),
        None,
        "two edits are too many for a short name"
    );
    assert_eq!(closest("prt", &known), Some("port"));
    assert_eq!(closest("sslcer", &known), Some("sslcert"));
    assert_eq!(closest("password_file", &known), None);
    // Two names equally close: no guess.
    assert_eq!(closest("ssl", &["ssla", "sslb"]), None);
}

#[test]
fn a_missing_user_names_where_it_can_be_given() {
    let message = error(&[("PG_URL", "postgres://db.example/app")]);
    insta::assert_snapshot!(message, @"user (in PG_URL, or PGUSER) is required: the PostgreSQL user to connect as (by default the OS user, when the process knows it)");
    let pairs = base().into_iter().filter(|(k, _)| *k != "PG_URL");
    let message = Config::from_pairs(pairs).unwrap_err().to_string();
    insta::assert_snapshot!(message, @"PGUSER is required: the PostgreSQL user to connect as (by default the OS user, when the process knows it)");
}

#[test]
fn the_os_user_is_the_postgresql_user_no_setting_names() {
    let pairs = || base().into_iter().filter(|(k, _)| *k != "PG_URL");
    let os = Defaults {
        os_user: Some("alice".to_owned()),
        ..Defaults::detached()
    };
    let config = Config::from_pairs_for(pairs(), Purpose::Run, &os).unwrap();
    assert_eq!(config.pg.user, "alice");
    assert_eq!(
        config.pg.database, "alice",
        "the database defaults to the user"
    );
    let named = Config::from_pairs_for(pairs().chain([("PGUSER", "bob")]), Purpose::Run, &os);
    assert_eq!(named.unwrap().pg.user, "bob", "a setting wins");
    let in_url = Config::from_pairs_for(
        pairs().chain([("PG_URL", "postgres://carol@db/app")]),
        Purpose::Run,
        &os,
    );
    assert_eq!(in_url.unwrap().pg.user, "carol");
}

#[test]
fn every_missing_required_setting_is_named_at_once() {
    let err = Config::from_pairs([("PG_URL", "postgres://db.example/app")]).unwrap_err();
    insta::assert_snapshot!(err.to_string(), @"FELDERA_PIPELINE, PG_PUBLICATION, TABLES and user (in PG_URL, or PGUSER) are required: FELDERA_PIPELINE: the name of the Feldera pipeline to feed; PG_PUBLICATION: the name of an existing publication; TABLES: a list like `users,items` or `users:people,public.items:lineitems` (or PG_TABLE with an optional FELDERA_TABLE); user (in PG_URL, or PGUSER): the PostgreSQL user to connect as (by default the OS user, when the process knows it)");
    let none: [(&str, &str); 0] = [];
    let err = Config::from_pairs(none).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("FELDERA_PIPELINE, PG_PUBLICATION, TABLES and PGUSER are required: "),
        "{err}"
    );
}

#[test]
fn slot_operations_need_only_the_connection_and_the_slot() {
    let slot_op = |pairs: &[(&'static str, &'static str)]| {
        Config::from_pairs_for(
            pairs.iter().copied(),
            Purpose::SlotOperation,
            &Defaults::detached(),
        )
    };
    let by_slot = slot_op(&[("PG_URL", "postgres://u@db/app"), ("PG_SLOT", "s1")]).unwrap();
    assert_eq!(by_slot.slot, "s1");
    assert_eq!(by_slot.feldera_pipeline, "", "Feldera is not asked");
    assert_eq!(by_slot.publication, "");
    let by_pipeline = slot_op(&[
        ("PG_URL", "postgres://u@db/app"),
        ("FELDERA_PIPELINE", "orders"),
    ])
    .unwrap();
    assert_eq!(by_pipeline.slot, "slotline_orders");
    let neither = slot_op(&[("PG_URL", "postgres://u@db/app")]).unwrap_err();
    insta::assert_snapshot!(neither.to_string(), @"FELDERA_PIPELINE is required: the name of the Feldera pipeline (or PG_SLOT, the slot's name)");
    // A run still needs them all.
    let run = Config::from_pairs([("PG_URL", "postgres://u@db/app"), ("PG_SLOT", "s1")]);
    assert_eq!(
        run.unwrap_err().variable,
        "FELDERA_PIPELINE, PG_PUBLICATION and TABLES"
    );
}

#[test]
fn ddl_needs_the_connection_and_tables_or_a_publication() {
    let ddl = |pairs: &[(&'static str, &'static str)]| {
        Config::from_pairs_for(pairs.iter().copied(), Purpose::Ddl, &Defaults::default())
    };
    let by_publication = ddl(&[("PG_URL", "postgres://u@db/app"), ("PG_PUBLICATION", "pub")]);
    assert_eq!(
        by_publication.unwrap().feldera_pipeline,
        "",
        "no pipeline needed"
    );
    assert!(ddl(&[("PG_URL", "postgres://u@db/app"), ("TABLES", "users")]).is_ok());
    let neither = ddl(&[("PG_URL", "postgres://u@db/app")]).unwrap_err();
    assert_eq!(neither.variable, "TABLES");
    assert!(
        neither.to_string().contains("or PG_PUBLICATION"),
        "{neither}"
    );
}

#[test]
fn progress_interval_defaults_to_30_s_and_zero_turns_it_off() {
    assert_eq!(with(&[]).unwrap().progress_interval_secs, 30);
    assert_eq!(
        with(&[("PROGRESS_INTERVAL_SECS", "0")])
            .unwrap()
            .progress_interval_secs,
        0
    );
    insta::assert_snapshot!(error(&[("PROGRESS_INTERVAL_SECS", "often")]), @r#"PROGRESS_INTERVAL_SECS="often" is invalid: a whole number from 0 to 86400"#);
}

#[test]
fn feldera_url_errors_say_what_is_wrong_with_it() {
    let query = error(&[("FELDERA_URL", "http://feldera:8080/?x=1")]);
    assert!(query.starts_with(r#"FELDERA_URL="http://feldera:8080/?x=1" is invalid: it has a query or a fragment; accepted: "#), "{query}");
    let relative = error(&[("FELDERA_URL", "feldera:8080")]);
    assert!(relative.contains("the scheme is feldera"), "{relative}");
    let broken = error(&[("FELDERA_URL", "http://u:hunter2@[::1")]);
    assert!(!broken.contains("hunter2"), "{broken}");
    assert!(broken.starts_with("FELDERA_URL=\"(not shown"), "{broken}");
}

#[test]
fn a_malformed_pg_url_is_shown_with_its_password_masked() {
    let shown = |url: &'static str| error(&[("PG_URL", url)]);
    insta::assert_snapshot!(shown("postgres://u:hunter2@db:99999/app"), @r#"PG_URL="postgres://u:***@db:99999/app" is invalid: postgres://user[:password]@host[:port][,host2[:port2]...]/database[?sslmode=...]"#);
    let conninfo = shown("host=db password='hun ter2' port");
    assert_eq!(
        conninfo,
        r#"PG_URL="host=db password=*** port" is invalid: a postgres:// URL or key=value pairs like `host=db port=5432 user=u dbname=d`"#
    );
    for (raw, secret) in [
        ("postgres://u:pa/ss@db:99999/app", "pa/ss"),
        ("postgres://u:p@ss@db:99999/app", "p@ss"),
        (
            "postgresql://u@db:99999/app?password=hunter2&sslmode=x",
            "hunter2",
        ),
        ("host=db password=hunter2 port", "hunter2"),
        ("host=db password='hunter2", "hunter2"),
        ("password = hunter2 host", "hunter2"),
        (r"password=hun\ ter2 x", "ter2"),
    ] {
        let message = error(&[("PG_URL", raw)]);
        assert!(!message.contains(secret), "{raw}: {message}");
        assert!(message.starts_with("PG_URL="), "{message}");
    }
}

#[test]
fn operations_settings_default_off_and_are_validated() {
    let c = with(&[]).unwrap();
    assert_eq!(c.metrics_addr, None);
    assert_eq!(c.slot_wal_warn_bytes, None);
    assert_eq!(c.slot_check_interval_ms, 10_000);
    assert!(!c.slot_failover);
    let c = with(&[
        ("METRICS_ADDR", "127.0.0.1:9187"),
        ("SLOT_WAL_WARN_BYTES", "1073741824"),
        ("SLOT_CHECK_INTERVAL_MS", "0"),
        ("PG_SLOT_FAILOVER", "true"),
    ])
    .unwrap();
    assert_eq!(c.metrics_addr.as_deref(), Some("127.0.0.1:9187"));
    assert_eq!(c.slot_wal_warn_bytes, Some(1 << 30));
    assert_eq!(c.slot_check_interval_ms, 0);
    assert!(c.slot_failover);
    assert_eq!(
        error(&[("METRICS_ADDR", "localhost")]),
        "METRICS_ADDR=\"localhost\" is invalid: an IP address and port to listen on, like 127.0.0.1:9187 or [::]:9187"
    );
    assert!(
        error(&[("SLOT_CHECK_INTERVAL_MS", "50")]).contains("0 (off) or a whole number from 100")
    );
    assert!(error(&[("SLOT_WAL_WARN_BYTES", "0")]).contains("SLOT_WAL_WARN_BYTES=\"0\""));
    assert!(error(&[("PG_SLOT_FAILOVER", "maybe")]).contains("PG_SLOT_FAILOVER"));
}

#[test]
fn the_state_directory_is_absolute_and_says_whether_the_operator_chose_it() {
    let with = |state_dir: Option<&str>, defaults: &Defaults| {
        let pairs = base()
            .into_iter()
            .filter(|(k, _)| *k != "STATE_DIR")
            .chain(state_dir.map(|dir| ("STATE_DIR", dir)));
        Config::from_pairs_for(pairs, Purpose::Run, defaults)
    };
    let process = Defaults {
        state_dir: Some("/home/ada/.local/state/slotline".to_owned()),
        working_dir: Some("/srv/app".to_owned()),
        ..Defaults::default()
    };
    let unset = with(None, &process).unwrap();
    assert_eq!(
        (unset.state_dir.as_str(), unset.state_dir_given),
        ("/home/ada/.local/state/slotline", false)
    );
    for (given, absolute) in [
        ("state", "/srv/app/state"),
        ("./state", "/srv/app/state"),
        (".", "/srv/app"),
        ("/var/lib/x", "/var/lib/x"),
    ] {
        let config = with(Some(given), &process).unwrap();
        assert_eq!(
            (config.state_dir.as_str(), config.state_dir_given),
            (absolute, true),
            "STATE_DIR={given}"
        );
    }
    let empty = with(Some(""), &process).unwrap();
    assert!(!empty.state_dir_given, "an empty STATE_DIR is unset");
    let homeless = Defaults::default();
    let message = with(None, &homeless).unwrap_err().to_string();
    assert!(
        message.starts_with("STATE_DIR is required: a directory this process may write"),
        "{message}"
    );
    assert!(
        message.contains("XDG_STATE_HOME and HOME are unset"),
        "{message}"
    );
    assert!(with(Some("/x"), &homeless).is_ok());
    let ddl = base().into_iter().filter(|(k, _)| *k != "STATE_DIR");
    assert!(
        Config::from_pairs_for(ddl, Purpose::Ddl, &homeless).is_ok(),
        "ddl writes no state file"
    );
}

#[test]
fn several_hosts_in_pg_url_as_libpq_takes_them() {
    let hosts = |url: &'static str| -> Vec<(String, u16)> {
        with(&[("PG_URL", url)])
            .unwrap()
            .pg
            .hosts
            .into_iter()
            .map(|h| (h.host, h.port))
            .collect()
    };
    let owned = |list: &[(&str, u16)]| -> Vec<(String, u16)> {
        list.iter().map(|(h, p)| ((*h).to_owned(), *p)).collect()
    };
    assert_eq!(
        hosts("postgres://u:pw@a:5433,b,[::1]:5435/app"),
        owned(&[("a", 5433), ("b", 5432), ("::1", 5435)])
    );
    assert_eq!(
        hosts("host=a,b port=5433 user=u dbname=app"),
        owned(&[("a", 5433), ("b", 5433)])
    );
    assert_eq!(
        hosts("host=a,b port=5433,5434 user=u dbname=app"),
        owned(&[("a", 5433), ("b", 5434)])
    );
    let pg = with(&[(
        "PG_URL",
        "postgres://u:pw@a,b/app?target_session_attrs=read-write",
    )])
    .unwrap()
    .pg;
    assert_eq!(
        (
            pg.host.as_str(),
            pg.port,
            pg.user.as_str(),
            pg.database.as_str()
        ),
        ("a", 5432, "u", "app")
    );
    assert_eq!(pg.target_session_attrs, SessionAttrs::ReadWrite);
    assert_eq!(pg.at(1).host, "b");
    assert_eq!(pg.password.as_ref().map(Secret::expose), Some("pw"));
    insta::assert_snapshot!(error(&[("PG_URL", "host=a,b,c port=1,2 user=u")]), @"port in PG_URL=\"1,2\" is invalid: one port for every host, or one per host (3 host(s) listed)");
    insta::assert_snapshot!(error(&[("PG_URL", "host=a,,c user=u")]), @"host in PG_URL=\"a,,c\" is invalid: a host name, address or socket directory, or several separated by commas (none empty)");
    insta::assert_snapshot!(error(&[("PG_URL", "postgres://u:pw@a,b/app?target_session_attrs=primry")]), @"target_session_attrs in PG_URL=\"primry\" is invalid: one of any, read-write, read-only, primary, standby, prefer-standby");
}

#[test]
fn target_session_attrs_accept_what_libpq_accepts() {
    use SessionAttrs as A;
    // (in recovery, read only by default): a primary, a read-only primary, a standby.
    let servers = [(false, false), (false, true), (true, true)];
    let accepted = |attrs: A, round: bool| -> Vec<bool> {
        servers
            .iter()
            .map(|&(recovery, read_only)| attrs.accepts(recovery, read_only, round))
            .collect()
    };
    assert_eq!(accepted(A::Any, false), [true, true, true]);
    assert_eq!(accepted(A::ReadWrite, false), [true, false, false]);
    assert_eq!(accepted(A::ReadOnly, false), [false, true, true]);
    assert_eq!(accepted(A::Primary, false), [true, true, false]);
    assert_eq!(accepted(A::Standby, false), [false, false, true]);
    assert_eq!(accepted(A::PreferStandby, false), [false, false, true]);
    assert_eq!(accepted(A::PreferStandby, true), [true, true, true]);
}
