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
    insta::assert_snapshot!(error(&[("BATCH_MAX_ROWS", "ten")]), @r#"BATCH_MAX_ROWS="ten" is invalid: a whole number from 1 to 10000000"#);
    insta::assert_snapshot!(error(&[("FELDERA_ACK_MODE", "sometimes")]), @r#"FELDERA_ACK_MODE="sometimes" is invalid: one of completed, accepted"#);
    insta::assert_snapshot!(error(&[("SNAPSHOT_MODE", "full")]), @r#"SNAPSHOT_MODE="full" is invalid: one of initial, never, inconsistent"#);
    insta::assert_snapshot!(error(&[("FELDERA_REQUIRE_PRIMARY_KEY", "maybe")]), @r#"FELDERA_REQUIRE_PRIMARY_KEY="maybe" is invalid: true or false (also 1/0, yes/no, on/off)"#);
    insta::assert_snapshot!(error(&[("PG_SLOT", "My-Slot")]), @r#"PG_SLOT="My-Slot" is invalid: 1 to 63 characters from a-z, 0-9 and _ (PostgreSQL's rule for replication slot names)"#);
    insta::assert_snapshot!(error(&[("FELDERA_URL", "ftp://x")]), @r#"FELDERA_URL="ftp://x" is invalid: an http:// or https:// URL with a host, like http://127.0.0.1:8080"#);
    insta::assert_snapshot!(error(&[("CRASH_AT", "midway")]), @r#"CRASH_AT="midway" is invalid: one of before_send, after_send, after_complete, after_ack, snapshot_after_slot, snapshot_mid_copy, snapshot_before_complete, retract_after_query, retract_mid_delete"#);
    insta::assert_snapshot!(error(&[("LOG_FORMAT", "xml")]), @r#"LOG_FORMAT="xml" is invalid: one of text, json"#);
}

#[test]
fn required_options_are_named_when_missing() {
    let err = Config::from_pairs([("PG_URL", "postgres://u@h/d"), ("TABLES", "t")]).unwrap_err();
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
    insta::assert_snapshot!(error(&[("RETRACT_PAGE_ROWS", "0")]), @r#"RETRACT_PAGE_ROWS="0" is invalid: a whole number from 1 to 1000000"#);
    insta::assert_snapshot!(error(&[("RETRACT_PAGE_ROWS", "1000001")]), @r#"RETRACT_PAGE_ROWS="1000001" is invalid: a whole number from 1 to 1000000"#);
    insta::assert_snapshot!(error(&[("RETRACT_PAGE_ROWS", "10k")]), @r#"RETRACT_PAGE_ROWS="10k" is invalid: a whole number from 1 to 1000000"#);
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
