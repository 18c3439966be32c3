//! The operator's commands (`check`, `status`, `drop-slot`), the slot monitor, failover
//! slots and the counters `health()` publishes.
use super::*;
use crate::config::Config;
use crate::io::Driver;
use crate::ops::{Check, DropSlot, Status};
use crate::report::Format;
use crate::testing::Operation;
use crate::time::Now;
use crate::Lsn;

fn check(pg: FakePg, schema: &str, tweak: impl FnOnce(&mut Script)) -> Script {
    let mut s = Script::operation(
        &[TABLES],
        pg,
        schema,
        None,
        tweak,
        |config: Config, now: Now| {
            Box::new(Check::new(config, now, Format::Text).expect("valid")) as Box<dyn Operation>
        },
    );
    answer_all(&mut s);
    s
}

/// Feldera answers every request (the ad-hoc query probe) as the fake models it.
fn answer_all(s: &mut Script) {
    while s.exit().is_none() && s.step() {}
}

fn printed(trace: &str) -> String {
    trace
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("print "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn check_of_a_working_setup_is_all_green_and_creates_nothing() {
    let mut s = check(pg(), SCHEMA, |_| {});
    let trace = s.take_trace();
    assert_eq!(s.exit().map(|e| e.0), Some(0), "{trace}");
    for forbidden in [
        "CREATE_REPLICATION_SLOT",
        "DROP_REPLICATION_SLOT",
        "START_REPLICATION",
        "write state",
    ] {
        assert!(!trace.contains(forbidden), "{forbidden}: {trace}");
    }
    rule!(
        "check runs the startup conversation as a survey, then its own questions (settings, SELECT, slot health), reads Feldera's pipeline and the state file, and prints one green line per finding; it creates, drops and writes nothing and exits 0.",
        trace
    );
}

#[test]
fn check_of_a_broken_setup_prints_one_line_per_problem_with_its_fix() {
    let mut broken = pg_with(ReplicaIdentity::Nothing, "60s");
    broken.slot_confirmed = None;
    let mismatched = SCHEMA.replace(
        r#"{"name":"qty","case_sensitive":false,"columntype":{"type":"INTEGER","nullable":true}}"#,
        r#"{"name":"qty","case_sensitive":false,"columntype":{"type":"DATE","nullable":true}}"#,
    );
    let mut s = check(broken, &mismatched, |s| {
        s.publication_exists = false;
        s.settings[0] = "replica".into();
        s.set_deployment_status("Paused");
    });
    let trace = s.take_trace();
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    let report = printed(&trace);
    let failures: Vec<&str> = report.lines().filter(|l| l.starts_with("FAIL")).collect();
    for (what, line) in [
        ("no publication", "publication \"pub\" does not exist"),
        ("wal_level", "wal_level is replica"),
        ("missing key", "REPLICA IDENTITY is NOTHING"),
        ("schema mismatch", "qty"),
        ("pipeline not running", "is Paused, not Running"),
    ] {
        let found: Vec<&&str> = failures.iter().filter(|l| l.contains(line)).collect();
        assert_eq!(
            found.len(),
            1,
            "{what}: one line containing {line:?} in\n{report}"
        );
        assert!(
            found[0].contains("(fix: "),
            "{what} says how to fix it: {}",
            found[0]
        );
    }
    assert!(failures.iter().all(|l| l.contains("(fix: ")), "{report}");
    rule!(
        "A broken setup (no publication, wal_level replica, REPLICA IDENTITY NOTHING, a Feldera column of another type, a paused pipeline) gives one FAIL line per problem, each with its fix; the check still creates nothing and exits 1.",
        report
    );
}

#[test]
fn check_refuses_a_server_older_than_15_naming_its_version() {
    let mut s = check(pg(), SCHEMA, |s| s.set_server_version("14.12"));
    let report = printed(&s.take_trace());
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    let line = report
        .lines()
        .find(|l| l.starts_with("FAIL server"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(line.contains("PostgreSQL 14.12 is not supported"), "{line}");
}

#[test]
fn a_start_refuses_a_server_older_than_15_before_anything_is_created() {
    let mut pg = pg();
    pg.slot_confirmed = None;
    let mut s = Script::operation(
        &[TABLES],
        pg,
        SCHEMA,
        None,
        |s| s.set_server_version("14.12"),
        |config, now| {
            Box::new(crate::pipeline::Pipeline::new(config, 7, now).expect("valid"))
                as Box<dyn Operation>
        },
    );
    let trace = s.take_trace();
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    assert!(!trace.contains("CREATE_REPLICATION_SLOT"), "{trace}");
    assert!(
        trace.contains("PostgreSQL 14.12 is not supported: slotline needs PostgreSQL 15 or newer"),
        "{trace}"
    );
}

#[test]
fn check_of_a_missing_publication_names_the_ones_the_database_has() {
    let mut s = check(pg(), SCHEMA, |s| {
        s.publication_exists = false;
        s.other_publications = vec!["audit_pub".into(), "shop_pub".into()];
    });
    let report = printed(&s.take_trace());
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    let line = report
        .lines()
        .find(|l| l.starts_with("FAIL publication"))
        .unwrap_or_else(|| panic!("{report}"));
    rule!(
        "check of a publication that does not exist names the database's publications and suggests setting PG_PUBLICATION to one of them.",
        line
    );
}

#[test]
fn a_start_with_a_missing_publication_lists_the_ones_there_are_before_anything_is_created() {
    for (others, listed) in [
        (vec![], "this database has no publication"),
        (
            vec!["audit_pub".to_owned(), "shop_pub".to_owned()],
            "which has \"audit_pub\", \"shop_pub\"; set PG_PUBLICATION to one of them",
        ),
    ] {
        let mut pg = pg();
        pg.slot_confirmed = None;
        let mut s = Script::operation(
            &[TABLES],
            pg,
            SCHEMA,
            None,
            |s| {
                s.publication_exists = false;
                s.other_publications = others;
            },
            |config, now| {
                Box::new(crate::pipeline::Pipeline::new(config, 7, now).expect("valid"))
                    as Box<dyn Operation>
            },
        );
        let trace = s.take_trace();
        let (code, reason) = s.exit().expect("the start is refused");
        assert_eq!(*code, 1, "{trace}");
        assert!(!trace.contains("CREATE_REPLICATION_SLOT"), "{trace}");
        assert!(
            reason.contains("publication \"pub\" does not exist") && reason.contains(listed),
            "{reason}"
        );
    }
}

/// A start on `pg` (no slot yet), tweaked by `tweak`: its exit code and reason.
fn refused_start(mut pg: FakePg, tweak: impl FnOnce(&mut Script)) -> (i32, String, String) {
    pg.slot_confirmed = None;
    let mut s = Script::operation(&[TABLES], pg, SCHEMA, None, tweak, |config, now| {
        Box::new(crate::pipeline::Pipeline::new(config, 7, now).expect("valid"))
            as Box<dyn Operation>
    });
    let trace = s.take_trace();
    let (code, reason) = s
        .exit()
        .cloned()
        .unwrap_or_else(|| panic!("the start is refused: {trace}"));
    (code, reason, trace)
}

/// The fix of `check`'s failed finding about `item`.
fn check_fix(pg: FakePg, item: &str, tweak: impl FnOnce(&mut Script)) -> String {
    let mut s = check(pg, SCHEMA, tweak);
    let report = printed(&s.take_trace());
    let line = report
        .lines()
        .find(|l| l.starts_with(&format!("FAIL {item} ")))
        .unwrap_or_else(|| panic!("no FAIL {item} in\n{report}"));
    let (_, fix) = line
        .split_once(" (fix: ")
        .unwrap_or_else(|| panic!("no fix: {line}"));
    format!("(fix: {fix}")
}

/// The fake server, where row-level security applies to users for slotline's role.
fn row_secured() -> FakePg {
    let mut pg = pg();
    for table in pg.tables.iter_mut().filter(|t| t.relation.name == "users") {
        table.row_security = true;
    }
    pg
}

#[test]
fn a_routed_table_read_through_row_level_security_is_refused_unless_nothing_is_copied() {
    const COPYING: (&str, &str) = ("SNAPSHOT_MODE", "initial");
    let start = |pg: FakePg| {
        Script::operation(
            &[TABLES, COPYING],
            pg,
            SCHEMA,
            None,
            |_| {},
            |config, now| {
                Box::new(crate::pipeline::Pipeline::new(config, 7, now).expect("valid"))
                    as Box<dyn Operation>
            },
        )
    };
    let mut pg = row_secured();
    pg.slot_confirmed = None;
    let mut s = start(pg.clone());
    let trace = s.take_trace();
    let (code, reason) = s.exit().cloned().unwrap_or_else(|| panic!("{trace}"));
    assert_eq!(code, 1, "{trace}");
    assert!(!trace.contains("CREATE_REPLICATION_SLOT"), "{trace}");
    assert!(!trace.contains("COPY"), "{trace}");
    assert!(
        reason.contains(
            "routed table public.users has row-level security that applies to role \"slotline\""
        ) && reason.contains("a copy would read only the rows the role's policies show it"),
        "{reason}"
    );
    // check says the same, with the same fix.
    let mut c = Script::operation(
        &[TABLES, COPYING],
        pg.clone(),
        SCHEMA,
        None,
        |_| {},
        |config, now| {
            Box::new(Check::new(config, now, Format::Text).expect("valid")) as Box<dyn Operation>
        },
    );
    answer_all(&mut c);
    let report = printed(&c.take_trace());
    assert_eq!(c.exit().map(|e| e.0), Some(1), "{report}");
    let line = report
        .lines()
        .find(|l| l.starts_with("FAIL table public.users "))
        .unwrap_or_else(|| panic!("{report}"));
    let (_, fix) = line
        .split_once(" (fix: ")
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        reason.ends_with(&format!("(fix: {fix}")),
        "{reason}\n{line}"
    );
    assert!(fix.contains("ALTER ROLE slotline BYPASSRLS"), "{fix}");
    // The other table is still checked, and maps.
    assert!(report.contains("ok   table public.items"), "{report}");
    // Stream only: nothing reads the table through its policies.
    let mut s = start_streaming_only(pg);
    let trace = s.take_trace();
    assert!(s.exit().is_none(), "{trace}");
    assert!(trace.contains("START_REPLICATION"), "{trace}");
    assert!(!trace.contains("row-level security"), "{trace}");
}

fn start_streaming_only(pg: FakePg) -> Script {
    Script::new(&[TABLES, ("SNAPSHOT_MODE", "never")], pg, SCHEMA)
}

#[test]
fn a_refused_start_says_the_fix_check_gives_for_the_same_problem() {
    let unpublished = || {
        let mut pg = pg();
        pg.tables.retain(|t| t.relation.name == "users");
        pg
    };
    let old_server = |s: &mut Script| s.set_server_version("14.12");
    let no_publication = |s: &mut Script| s.publication_exists = false;
    let no_pipeline = |s: &mut Script| s.pipelines_instead = Some(vec!["shop".into()]);
    type Tweak<'a> = &'a dyn Fn(&mut Script);
    let cases: [(&str, FakePg, Tweak<'_>); 4] = [
        ("tables", unpublished(), &|_| {}),
        ("server", pg(), &old_server),
        ("publication", pg(), &no_publication),
        ("feldera", pg(), &no_pipeline),
    ];
    for (item, pg, tweak) in cases {
        let fix = check_fix(pg.clone(), item, tweak);
        let (code, reason, trace) = refused_start(pg, tweak);
        assert_eq!(code, 1, "{trace}");
        assert!(!trace.contains("CREATE_REPLICATION_SLOT"), "{trace}");
        assert!(
            reason.ends_with(&fix),
            "{item}: the start's reason does not end with check's {fix:?}:\n{reason}"
        );
    }
}

#[test]
fn check_of_a_pipeline_feldera_does_not_have_names_the_ones_it_has() {
    let mut s = check(pg(), SCHEMA, |s| {
        s.pipelines_instead = Some(vec!["audit".into(), "shop".into()]);
    });
    let trace = s.take_trace();
    assert_eq!(s.exit().map(|e| e.0), Some(1), "{trace}");
    let report = printed(&trace);
    let line = report
        .lines()
        .find(|l| l.starts_with("FAIL feldera "))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(!trace.contains("CREATE_REPLICATION_SLOT"), "{trace}");
    rule!(
        "check of a pipeline Feldera answers 404 for asks GET /v0/pipelines and names the pipelines there are in the one FAIL line.",
        line
    );
}

#[test]
fn a_start_with_a_pipeline_feldera_does_not_have_lists_the_ones_it_has_and_exits_1() {
    for (names, listed) in [
        (
            vec![],
            "Feldera has no pipeline; create p or set FELDERA_PIPELINE",
        ),
        (
            vec!["audit".to_owned(), "shop".to_owned()],
            "Feldera has pipelines \"audit\", \"shop\"; set FELDERA_PIPELINE to one of them",
        ),
    ] {
        let mut pg = pg();
        pg.slot_confirmed = None;
        let mut s = Script::operation(
            &[TABLES],
            pg,
            SCHEMA,
            None,
            |s| s.pipelines_instead = Some(names),
            |config, now| {
                Box::new(crate::pipeline::Pipeline::new(config, 7, now).expect("valid"))
                    as Box<dyn Operation>
            },
        );
        let trace = s.take_trace();
        let (code, reason) = s.exit().expect("the start is refused");
        assert_eq!(*code, 1, "{trace}");
        assert!(!trace.contains("CREATE_REPLICATION_SLOT"), "{trace}");
        assert!(
            trace.contains("GET /v0/pipelines?selector=status"),
            "the list is asked for once: {trace}"
        );
        assert_eq!(trace.matches("GET /v0/pipelines?").count(), 1, "{trace}");
        assert!(
            reason.contains("HTTP 404 UnknownPipelineName") && reason.contains(listed),
            "{reason}"
        );
    }
}

#[test]
fn check_json_is_one_document_with_every_finding() {
    let mut s = Script::operation(
        &[TABLES],
        pg(),
        SCHEMA,
        None,
        |_| {},
        |config, now| {
            Box::new(Check::new(config, now, Format::Json).expect("valid")) as Box<dyn Operation>
        },
    );
    answer_all(&mut s);
    let report = printed(&s.take_trace());
    let value: serde_json::Value = serde_json::from_str(&report).expect("one JSON document");
    assert_eq!(value["ok"], serde_json::json!(true));
    assert!(
        value["findings"].as_array().is_some_and(|f| f.len() > 8),
        "{value}"
    );
}

#[test]
fn check_of_a_lost_slot_under_stream_only_says_a_start_would_refuse() {
    let mut s = check(pg(), SCHEMA, |s| s.slot_health.wal_status = "lost".into());
    let report = printed(&s.take_trace());
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    let line = report
        .lines()
        .find(|l| l.starts_with("FAIL start"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(line.contains("invalidated (wal_status = lost)"), "{line}");
}

fn status(tweak: impl FnOnce(&mut Script)) -> Script {
    Script::operation(&[TABLES], pg(), SCHEMA, None, tweak, |config, now| {
        Box::new(Status::new(config, now, Format::Text).expect("valid")) as Box<dyn Operation>
    })
}

#[test]
fn status_reports_the_slot_its_lag_the_state_file_and_feldera() {
    let mut s = status(|s| {
        s.slot_health.active_pid = Some(4242);
        s.slot_health.keep_mb = 1024;
    });
    let trace = s.take_trace();
    assert_eq!(s.exit().map(|e| e.0), Some(0));
    rule!(
        "status asks one plain connection for the slot's health (active, confirmed_flush_lsn, restart_lsn, wal_status, safe_wal_size), computes lag and retained WAL against the server's current position, and adds the state file and Feldera's pipeline state; it exits 0.",
        trace
    );
}

#[test]
fn status_before_the_slot_exists_says_so_and_not_all_good() {
    let mut s = status(|s| s.lose_slot());
    let report = printed(&s.take_trace());
    assert_eq!(s.exit().map(|e| e.0), Some(0), "{report}");
    let slot = "slotline_p does not exist yet (a first start will create it)";
    assert!(report.lines().any(|l| l.ends_with(slot)), "{report}");
    assert!(!report.contains("all good"), "{report}");
    assert!(
        report.ends_with("status: slot slotline_p does not exist yet"),
        "{report}"
    );
}

#[test]
fn status_of_an_invalidated_slot_exits_1_with_the_action() {
    let mut s = status(|s| {
        s.set_server_version("17.2");
        s.slot_health.wal_status = "lost".into();
        s.slot_health.invalidation_reason = Some("wal_removed".into());
    });
    let report = printed(&s.take_trace());
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    let line = report
        .lines()
        .find(|l| l.starts_with("FAIL slot"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        line.contains("invalidated (wal_status = lost, invalidation_reason = wal_removed)")
            && line.contains("SNAPSHOT_MODE=initial"),
        "{line}"
    );
}

fn drop_slot(confirmed: bool, state: Option<Vec<u8>>, tweak: impl FnOnce(&mut Script)) -> Script {
    Script::operation(&[TABLES], pg(), SCHEMA, state, tweak, move |config, now| {
        Box::new(DropSlot::new(config, now, Format::Text, confirmed).expect("valid"))
            as Box<dyn Operation>
    })
}

#[test]
fn drop_slot_without_yes_touches_nothing_and_exits_2() {
    let mut s = drop_slot(false, Some(b"{}".to_vec()), |_| {});
    let trace = s.take_trace();
    assert_eq!(s.exit().map(|e| e.0), Some(2));
    assert!(!trace.contains("-> pg#"), "{trace}");
    assert!(s.state_file.is_some());
    assert!(printed(&trace).contains("without --yes"), "{trace}");
}

#[test]
fn drop_slot_refuses_an_active_slot_and_keeps_the_state_file() {
    let mut s = drop_slot(true, Some(b"{}".to_vec()), |s| {
        s.slot_health.active_pid = Some(4242)
    });
    let trace = s.take_trace();
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    assert!(!trace.contains("pg_drop_replication_slot"), "{trace}");
    assert!(s.state_file.is_some(), "the state file stays");
    assert!(
        printed(&trace).contains("in use by PostgreSQL backend pid 4242"),
        "{trace}"
    );
}

#[test]
fn drop_slot_drops_the_slot_then_the_state_file() {
    let mut s = drop_slot(true, Some(b"{}".to_vec()), |_| {});
    let trace = s.take_trace();
    assert_eq!(s.exit().map(|e| e.0), Some(0));
    assert!(s.state_file.is_none());
    rule!(
        "drop-slot --yes reads the slot, drops it when no process holds it, then removes the state file, and reports both; exit 0.",
        trace
    );
}

/// A streaming pipeline whose slot monitor samples every second.
fn monitored(config: &[(&str, &str)]) -> Script {
    let mut pairs = vec![("SLOT_CHECK_INTERVAL_MS", "1000")];
    pairs.extend_from_slice(config);
    streaming(&pairs)
}

#[test]
fn a_slot_invalidated_while_streaming_exits_1_with_the_action_never_recreating_it() {
    let mut s = monitored(&[]);
    s.advance(1000);
    s.slot_health.wal_status = "lost".into();
    s.advance(1000);
    let trace = s.take_trace();
    assert_eq!(s.exit().map(|e| e.0), Some(1), "{trace}");
    assert!(!trace.contains("CREATE_REPLICATION_SLOT") && !trace.contains("DROP_REPLICATION_SLOT"));
    rule!(
        "The slot monitor samples the slot on its own connection; a sample showing it invalidated (wal_status = lost) is the slot-lost failure: exit 1 with the action (re-snapshot), the slot neither dropped nor recreated.",
        trace
    );
}

#[test]
fn a_failover_slot_on_a_primary_naming_no_synchronized_standby_is_warned_about_once_per_run() {
    let mut pairs = vec![
        TABLES,
        ("SLOT_CHECK_INTERVAL_MS", "1000"),
        ("PG_SLOT_FAILOVER", "true"),
    ];
    pairs.push(("SNAPSHOT_MODE", "never"));
    let mut s = Script::new_tweaked(&pairs, pg(), SCHEMA, |s| s.set_server_version("17.2"));
    s.advance(1000);
    s.disconnect();
    s.advance(31_000);
    s.advance(1000);
    let trace = s.take_trace();
    assert_eq!(s.exit(), None, "{trace}");
    assert!(
        trace.matches("<slot health>").count() >= 3,
        "sampled again: {trace}"
    );
    let warned: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("synchronized_standby_slots is empty"))
        .collect();
    assert_eq!(warned.len(), 1, "once per run, sessions included: {trace}");
    assert!(
        warned[0].contains("log warn:") && warned[0].contains("(fix: on the primary"),
        "{}",
        warned[0]
    );
    // Without a failover slot there is nothing to say.
    let mut s = monitored(&[]);
    s.advance(1000);
    assert!(!s.take_trace().contains("synchronized_standby_slots"));
}

#[test]
fn a_slot_found_lost_when_a_later_session_starts_exits_1() {
    let mut s = streaming(&[]);
    s.slot_health.wal_status = "lost".into();
    s.disconnect();
    s.advance(31_000);
    let trace = s.take_trace();
    assert_eq!(s.exit().map(|e| e.0), Some(1), "{trace}");
    assert!(trace.contains("slot-lost: exit 1"), "{trace}");
    assert!(
        trace.contains("was invalidated while slotline ran"),
        "{trace}"
    );
    assert!(!trace.contains("CREATE_REPLICATION_SLOT"), "{trace}");
}

#[test]
fn retained_wal_past_the_limit_warns_once_and_again_when_back_under() {
    let mut s = monitored(&[("SLOT_WAL_WARN_BYTES", "1048576")]);
    s.slot_health.restart_lsn = Lsn(s.slot_health.current_wal.0 - (2 << 20));
    s.advance(3000);
    s.slot_health.restart_lsn = s.slot_health.current_wal;
    s.advance(1000);
    let trace = s.take_trace();
    let warnings: Vec<&str> = trace.lines().filter(|l| l.contains("retains")).collect();
    assert_eq!(warnings.len(), 1, "{trace}");
    assert!(
        warnings[0].contains("the slot retains 2.0 MiB of WAL: over SLOT_WAL_WARN_BYTES (1.0 MiB)"),
        "{}",
        warnings[0]
    );
    assert!(trace.contains("back under its limits"), "{trace}");
    assert_eq!(s.exit(), None);
}

#[test]
fn status_publishes_what_was_sent_and_the_slot_sample() {
    let mut s = monitored(&[("BATCH_LINGER_MS", "0")]);
    s.advance(1000);
    insert_tx(&mut s, 700, 0x2100, &["1", "2", "3"]);
    s.accept();
    s.advance(30);
    s.complete();
    let status = s.pipeline().health();
    assert_eq!(status.sent.rows_sent, 3);
    assert_eq!(status.sent.ingress_requests, 1);
    assert_eq!(status.batches_durable, 1);
    assert_eq!(status.sent.completion_wait.count, 1);
    assert_eq!(status.sent.completion_wait.sum_us, 30_000);
    assert_eq!(status.flush, Lsn(0x2100));
    let slot = status.slot.as_ref().expect("sampled");
    assert_eq!(status.lag_bytes(), Some(slot.current_wal.0 - 0x2100));
    assert_eq!(status.readiness(crate::time::Mono(2_000_000)), Ok(()));
}

#[test]
fn failover_slots_are_created_with_failover_on_17_and_refused_before() {
    let mut fresh = pg();
    fresh.slot_confirmed = None;
    let pipeline = |config: Config, now: Now| {
        Box::new(crate::pipeline::Pipeline::new(config, 7, now).expect("valid"))
            as Box<dyn Operation>
    };
    let config = [TABLES, ("PG_SLOT_FAILOVER", "true")];
    let mut s = Script::operation(
        &config,
        fresh.clone(),
        SCHEMA,
        None,
        |s| s.set_server_version("17.2"),
        pipeline,
    );
    let trace = s.take_trace();
    assert!(
        trace.contains("CREATE_REPLICATION_SLOT \"slotline_p\" LOGICAL pgoutput (SNAPSHOT 'nothing', FAILOVER true)"),
        "{trace}"
    );
    let mut s = Script::operation(
        &config,
        fresh,
        SCHEMA,
        None,
        |s| s.set_server_version("16.4"),
        pipeline,
    );
    let trace = s.take_trace();
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    assert!(!trace.contains("CREATE_REPLICATION_SLOT"), "{trace}");
    assert!(
        trace.contains("PG_SLOT_FAILOVER=true needs PostgreSQL 17 or newer"),
        "{trace}"
    );
}

#[test]
fn operations_publish_no_status() {
    let s = Check::new(
        Config::from_pairs([
            ("PG_URL", "postgres://u@db/app?sslmode=disable"),
            ("PG_PUBLICATION", "pub"),
            ("TABLES", "users"),
            ("FELDERA_PIPELINE", "p"),
        ])
        .unwrap(),
        Now::default(),
        Format::Text,
    )
    .unwrap();
    assert!(Driver::health(&s).is_none());
}

#[test]
fn check_names_a_table_retraction_could_not_read_back() {
    // lineitems has no primary key: TRUNCATE (published) could not read its keys back,
    // and a snapshot could not check that it is empty.
    let keyless = SCHEMA.replace(r#""primary_key":["sku"],"#, "");
    let config = [
        TABLES,
        ("FELDERA_REQUIRE_PRIMARY_KEY", "false"),
        ("SNAPSHOT_MODE", "initial"),
    ];
    let mut fresh = pg_with(ReplicaIdentity::Default, "60s");
    fresh.slot_confirmed = None;
    let mut s = Script::operation(
        &config,
        fresh,
        &keyless,
        None,
        |_| {},
        |config, now| {
            Box::new(Check::new(config, now, Format::Text).expect("valid")) as Box<dyn Operation>
        },
    );
    answer_all(&mut s);
    let report = printed(&s.take_trace());
    assert_eq!(s.exit().map(|e| e.0), Some(1), "{report}");
    let failures: Vec<&str> = report.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        failures
            .iter()
            .any(|l| l.starts_with("FAIL truncate public.items")),
        "{report}"
    );
    assert!(
        failures
            .iter()
            .any(|l| l.starts_with("FAIL retract lineitems")),
        "{report}"
    );
}

#[test]
fn check_warns_when_the_pipeline_does_not_answer_json_ad_hoc_queries() {
    let mut out = String::new();
    for (case, status, body, expected) in [
        (
            "answered as slotline reads it",
            200,
            "",
            "ok   feldera queries",
        ),
        (
            "refused as a deprecated format",
            400,
            r#"{"message":"format 'json' is deprecated and no longer supported: use 'arrow_ipc'","error_code":"InvalidParameter","details":null}"#,
            "may no longer answer format=json",
        ),
        (
            "a notice line where no row can be",
            200,
            "{\"warning\":\"format=json is deprecated\"}\n",
            "with a row",
        ),
        (
            "unavailable",
            503,
            r#"{"message":"pipeline unavailable","error_code":"PipelineUnavailable","details":null}"#,
            "need ad-hoc queries",
        ),
    ] {
        let mut s = Script::operation(
            &[TABLES],
            pg(),
            SCHEMA,
            None,
            |_| {},
            |config, now| {
                Box::new(Check::new(config, now, Format::Text).expect("valid"))
                    as Box<dyn Operation>
            },
        );
        assert_eq!(
            s.waiting_query().as_deref(),
            Some(r#"SELECT * FROM "users" LIMIT 0"#),
            "{case}: the probe asks about the first routed table"
        );
        s.answer(status, body);
        answer_all(&mut s);
        let report = printed(&s.take_trace());
        // Only retraction needs queries: a warning, never a failed check.
        assert_eq!(s.exit().map(|e| e.0), Some(0), "{case}: {report}");
        let line = report
            .lines()
            .find(|l| l.contains("feldera queries"))
            .unwrap_or_else(|| panic!("{case}: no probe line: {report}"));
        assert!(line.contains(expected), "{case}: {line}");
        assert_eq!(
            line.starts_with("WARN"),
            status != 200 || !body.is_empty(),
            "{case}: {line}"
        );
        out.push_str(&format!("== {case}\n{line}\n"));
    }
    rule!(
        "check asks a running pipeline one free ad-hoc query (SELECT * ... LIMIT 0) of the first routed table, in format=json as TRUNCATE retraction and a re-snapshot's leftover check do. Any answer but an empty one warns: a refusal naming the format says Feldera may have dropped the deprecated JSON answers; a row where none can be says the answers changed; any other failure says retraction would need queries that fail. The check still passes: streaming needs no queries.",
        out
    );
}

#[test]
fn check_warns_of_a_feldera_column_narrower_than_postgresql_s() {
    let narrow = SCHEMA.replace(
        r#"{"name":"id","case_sensitive":false,"columntype":{"type":"BIGINT","nullable":false}}"#,
        r#"{"name":"id","case_sensitive":false,"columntype":{"type":"INTEGER","nullable":false}}"#,
    );
    let mut s = check(pg(), &narrow, |_| {});
    let report = printed(&s.take_trace());
    assert_eq!(
        s.exit().map(|e| e.0),
        Some(0),
        "a warning, not a failure: {report}"
    );
    let line = report
        .lines()
        .find(|l| l.starts_with("WARN table public.users") && l.contains("narrower"))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(
        line.contains(
            "Feldera column id is INTEGER NOT NULL, narrower than PostgreSQL column id (int8)"
        ),
        "{line}"
    );
    assert!(
        line.contains("until the Feldera column is widened"),
        "{line}"
    );
}
