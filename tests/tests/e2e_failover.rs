//! End to end, both shells, PostgreSQL 17 and later (failover slots) unless said: a primary and a
//! streaming standby that synchronises slotline's failover slot, without
//! `synchronized_standby_slots` (PostgreSQL's default). The standby goes down, the primary
//! commits on and slotline delivers and acknowledges those commits, the primary crashes and
//! the standby, which never received that WAL, is promoted on the primary's address and
//! written to. Its timeline forked behind what slotline delivered: the next session sees
//! it (`TIMELINE_HISTORY`) and copies every table again, retracting what the new primary
//! never had, so Feldera ends equal to the new primary without a restart by hand
//! (docs/snapshot.md, "A timeline that forked"). With `synchronized_standby_slots` naming the
//! standby, the same failover streams on from the synchronised slot and copies nothing again.
//! A two-host `PG_URL` rides through the same failover without a moving address. And on any
//! version: a standby promoted without the slot is copied again, the warning naming why,
//! and a point-in-time restore behind what was delivered is copied again.

use serde_json::{json, Value};
use slotline_tests::e2e::{Connector, Env, Shell};
use slotline_tests::pg::{wait_for, ClusterOptions, PgCluster};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(90);

const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text);
     CREATE PUBLICATION pub FOR TABLE users;";

fn schema() -> Value {
    let field = |name: &str, ty: &str, nullable: bool| json!({"name": name, "case_sensitive": false, "columntype": {"type": ty, "nullable": nullable}});
    json!({"inputs": [{"name": "users", "case_sensitive": false, "materialized": true,
        "properties": {}, "primary_key": ["id"],
        "fields": [field("id", "BIGINT", false), field("name", "VARCHAR", true)]}],
        "outputs": []})
}

fn rows(pg: &PgCluster, db: &str) -> Value {
    let json = pg.psql(
        db,
        "SELECT coalesce(json_agg(row_to_json(t) ORDER BY id::text), '[]') FROM users t",
    );
    serde_json::from_str(&json).expect("rows as JSON")
}

fn equal(env: &Env, pg: &PgCluster) -> bool {
    wait_for(WAIT, || {
        (Value::Array(env.feldera_rows("users", "id")) == rows(pg, &env.db)).then_some(())
    })
    .is_some()
}

/// A primary holding users 1 to 100 in the test's database (started with `options`), or
/// `None` below `min_version` (`server_version_num`).
fn primary_with_users(env: &Env, options: ClusterOptions, min_version: u32) -> Option<PgCluster> {
    let primary = PgCluster::start_with(options);
    let version: u32 = primary
        .psql("postgres", "SHOW server_version_num")
        .parse()
        .expect("a number");
    if version < min_version {
        return None;
    }
    primary.create_database(&env.db);
    primary.psql(&env.db, SETUP);
    primary.psql(
        &env.db,
        "INSERT INTO users SELECT g, 'u' || g FROM generate_series(1, 100) g",
    );
    Some(primary)
}

/// A standby of `primary` that can take slotline's failover slot (by
/// `pg_sync_replication_slots`, when `slot_synced` asks); with `synchronized`, the primary
/// names it in `synchronized_standby_slots`.
fn failover_standby(primary: &PgCluster, synchronized: bool) -> PgCluster {
    let standby = primary.standby(
        ClusterOptions::default()
            .setting("hot_standby_feedback", "on")
            .setting("sync_replication_slots", "off"),
    );
    if synchronized {
        primary.psql(
            "postgres",
            "ALTER SYSTEM SET synchronized_standby_slots = 'standby1'",
        );
        primary.psql("postgres", "SELECT pg_catalog.pg_reload_conf()");
    }
    standby
}

/// The standby takes the failover slot as slotline acknowledged it so far.
fn slot_synced(standby: &PgCluster, env: &Env) {
    let slot = env.slot_name();
    let synced = wait_for(WAIT, || {
        let _ = standby.try_psql("postgres", "SELECT pg_catalog.pg_sync_replication_slots()");
        (standby.psql(
            "postgres",
            &format!(
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}' AND synced"
            ),
        ) == "1")
            .then_some(())
    });
    assert!(synced.is_some(), "{}", standby.server_log_tail());
}

/// slotline on `url`, copying users first; with a failover slot when `failover`.
fn connector_on(shell: Shell, env: &Env, url: &str, failover: bool) -> Connector {
    let failover = if failover { "true" } else { "false" };
    let config = env.config(&[
        ("TABLES", "users"),
        ("PG_URL", url),
        ("SNAPSHOT_MODE", "initial"),
        ("PG_SLOT_FAILOVER", failover),
    ]);
    Connector::spawn(shell, &config, &env.name)
}

fn a_promotion_that_forked_behind_what_was_delivered_is_repaired(shell: Shell) {
    let env = Env::new("fork", SETUP, schema());
    // Failover slots (and their synchronisation to a standby) are PostgreSQL 17's.
    let Some(primary) = primary_with_users(&env, ClusterOptions::default(), 170_000) else {
        return;
    };
    let mut standby = failover_standby(&primary, false);
    let address = primary.url(&env.db);
    let mut connector = connector_on(shell, &env, &address, true);
    assert!(equal(&env, &primary), "{}", connector.log_text());
    primary.psql(
        &env.db,
        "INSERT INTO users SELECT g, 'v' || g FROM generate_series(101, 120) g",
    );
    assert!(equal(&env, &primary), "{}", connector.log_text());
    slot_synced(&standby, &env);
    // The standby goes down; the primary commits on, and slotline delivers it all.
    standby.crash();
    primary.psql(
        &env.db,
        "INSERT INTO users SELECT g, 'ghost' || g FROM generate_series(1001, 1100) g;
         UPDATE users SET name = 'never happened' WHERE id <= 40;
         DELETE FROM users WHERE id BETWEEN 41 AND 70;",
    );
    assert!(equal(&env, &primary), "{}", connector.log_text());
    let delivered = primary.psql(
        "postgres",
        &format!(
            "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '{}'",
            env.slot_name()
        ),
    );
    // The primary dies; the standby, without that WAL, is promoted on its address.
    primary.crash();
    standby.restart();
    standby.promote();
    standby.move_to_port(primary.port());
    standby.psql(
        &env.db,
        "INSERT INTO users SELECT g, 'new primary ' || g FROM generate_series(2001, 2010) g;
         UPDATE users SET name = 'after promotion' WHERE id = 100;",
    );
    assert!(
        equal(&env, &standby),
        "Feldera is not equal to the new primary (slotline had acknowledged {delivered} on the old one): {}",
        connector.log_text()
    );
    let log = connector.log_text();
    assert!(log.contains("left timeline 1 at"), "{log}");
    assert!(connector.is_running(), "{log}");
    // And it streams on from the new slot.
    standby.psql(&env.db, "DELETE FROM users WHERE id = 2001");
    assert!(equal(&env, &standby), "{}", connector.log_text());
    assert_eq!(connector.stop(WAIT), Some(0), "{}", connector.log_text());
}

/// The same failover with the primary naming the standby in `synchronized_standby_slots`:
/// slotline never gets WAL the standby lacks, so the promoted server's timeline left the old
/// one after everything delivered, and the session streams on from the synchronised slot
/// without copying again.
fn a_promotion_with_synchronized_standby_slots_streams_on(shell: Shell) {
    let env = Env::new("promoted", SETUP, schema());
    // Failover slots (and their synchronisation to a standby) are PostgreSQL 17's.
    let Some(primary) = primary_with_users(&env, ClusterOptions::default(), 170_000) else {
        return;
    };
    let mut standby = failover_standby(&primary, true);
    let address = primary.url(&env.db);
    let mut connector = connector_on(shell, &env, &address, true);
    assert!(equal(&env, &primary), "{}", connector.log_text());
    primary.psql(
        &env.db,
        "INSERT INTO users SELECT g, 'v' || g FROM generate_series(101, 150) g;
         UPDATE users SET name = 'changed' WHERE id <= 20;
         DELETE FROM users WHERE id BETWEEN 21 AND 30;",
    );
    assert!(equal(&env, &primary), "{}", connector.log_text());
    slot_synced(&standby, &env);
    let copies_before = connector.log_text().matches("plan: snapshot").count();
    primary.crash();
    standby.promote();
    standby.move_to_port(primary.port());
    standby.psql(
        &env.db,
        "INSERT INTO users SELECT g, 'new primary ' || g FROM generate_series(2001, 2010) g;
         UPDATE users SET name = 'after promotion' WHERE id = 100;",
    );
    assert!(equal(&env, &standby), "{}", connector.log_text());
    let log = connector.log_text();
    assert_eq!(
        log.matches("plan: snapshot").count(),
        copies_before,
        "a promotion after everything delivered copies nothing again: {log}"
    );
    assert!(!log.contains("left timeline 1 at"), "{log}");
    assert!(connector.is_running(), "{log}");
    assert_eq!(connector.stop(WAIT), Some(0), "{}", connector.log_text());
}

/// A two-host `PG_URL` (`primary,standby`) with `target_session_attrs=primary`: the first
/// host serves; it dies, and the sessions go round: the dead first host, then the second,
/// passed over while it is a standby; once it is promoted where it is, it serves, with
/// nothing lost and nothing copied again.
fn two_hosts_survive_the_death_of_the_primary(shell: Shell) {
    let env = Env::new("two_hosts", SETUP, schema());
    // Failover slots (and their synchronisation to a standby) are PostgreSQL 17's.
    let Some(primary) = primary_with_users(&env, ClusterOptions::default(), 170_000) else {
        return;
    };
    let standby = failover_standby(&primary, true);
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{}?target_session_attrs=primary",
        primary.port(),
        standby.port(),
        env.db
    );
    let mut connector = connector_on(shell, &env, &url, true);
    assert!(equal(&env, &primary), "{}", connector.log_text());
    primary.psql(
        &env.db,
        "INSERT INTO users SELECT g, 'v' || g FROM generate_series(101, 150) g;
         UPDATE users SET name = 'changed' WHERE id <= 20;",
    );
    assert!(equal(&env, &primary), "{}", connector.log_text());
    slot_synced(&standby, &env);
    let copies_before = connector.log_text().matches("plan: snapshot").count();
    primary.crash();
    // Until the standby is promoted, sessions find the first host dead and pass over the
    // second.
    let passed_over = format!(
        "127.0.0.1:{} is a standby (in_hot_standby = on), not what target_session_attrs=primary asks for",
        standby.port()
    );
    let found = wait_for(WAIT, || {
        connector.log_text().contains(&passed_over).then_some(())
    });
    assert!(found.is_some(), "{}", connector.log_text());
    standby.promote();
    standby.psql(
        &env.db,
        "INSERT INTO users SELECT g, 'promoted ' || g FROM generate_series(2001, 2010) g;
         DELETE FROM users WHERE id = 1;",
    );
    assert!(equal(&env, &standby), "{}", connector.log_text());
    let log = connector.log_text();
    assert!(
        log.contains(&format!(
            "replication connection to 127.0.0.1:{}",
            primary.port()
        )),
        "the dead host's failure names it: {log}"
    );
    assert_eq!(
        log.matches("plan: snapshot").count(),
        copies_before,
        "nothing is copied again: {log}"
    );
    assert!(connector.is_running(), "{log}");
    assert_eq!(connector.stop(WAIT), Some(0), "{}", connector.log_text());
}

/// A standby promoted without slotline's slot (not a failover slot, or not synchronised):
/// the new primary has no slot, so the next session copies every table again, and the
/// warning says the server is on another timeline than the one slotline delivered on. Any
/// version (no failover slot is involved).
fn a_promoted_server_without_the_slot_is_copied_again_naming_why(shell: Shell) {
    let env = Env::new("no_slot", SETUP, schema());
    let primary = primary_with_users(&env, ClusterOptions::default(), 0).expect("any version");
    let mut standby = primary.standby(ClusterOptions::default());
    let address = primary.url(&env.db);
    let mut connector = connector_on(shell, &env, &address, false);
    assert!(equal(&env, &primary), "{}", connector.log_text());
    primary.psql(
        &env.db,
        "INSERT INTO users SELECT g, 'v' || g FROM generate_series(101, 150) g;
         DELETE FROM users WHERE id <= 10;",
    );
    assert!(equal(&env, &primary), "{}", connector.log_text());
    // Everything reached the standby, but the slot did not.
    let target = primary.psql("postgres", "SELECT pg_catalog.pg_current_wal_lsn()");
    let replayed = wait_for(WAIT, || {
        (standby.psql(
            "postgres",
            &format!("SELECT pg_catalog.pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"),
        ) == "t")
            .then_some(())
    });
    assert!(replayed.is_some(), "{}", standby.server_log_tail());
    primary.crash();
    standby.promote();
    standby.move_to_port(primary.port());
    standby.psql(
        &env.db,
        "INSERT INTO users SELECT g, 'new primary ' || g FROM generate_series(2001, 2010) g;
         UPDATE users SET name = 'after promotion' WHERE id = 100;",
    );
    assert!(equal(&env, &standby), "{}", connector.log_text());
    let log = connector.log_text();
    assert!(
        log.contains("is gone although")
            && log.contains("the server is on timeline 2, slotline delivered on timeline 1"),
        "{log}"
    );
    assert!(connector.is_running(), "{log}");
    standby.psql(&env.db, "DELETE FROM users WHERE id = 2001");
    assert!(equal(&env, &standby), "{}", connector.log_text());
    assert_eq!(connector.stop(WAIT), Some(0), "{}", connector.log_text());
}

/// A point-in-time restore to a position between the copy's consistent point and what
/// slotline last acknowledged: the restored server's slot (from the base backup) is past
/// the copy's consistent point, so nothing else says the database went back; its new
/// timeline left the old one behind what was delivered, and the run copies again. Any
/// version.
fn a_restore_to_a_point_behind_what_was_delivered_is_repaired(shell: Shell) {
    let env = Env::new("restored", SETUP, schema());
    let primary = primary_with_users(
        &env,
        ClusterOptions::default().setting("archive_mode", "on"),
        0,
    )
    .expect("any version");
    primary.enable_archive();
    let address = primary.url(&env.db);
    let mut connector = connector_on(shell, &env, &address, false);
    assert!(equal(&env, &primary), "{}", connector.log_text());
    let backup = primary.base_backup();
    primary.psql(
        &env.db,
        "INSERT INTO users SELECT g, 'kept' || g FROM generate_series(101, 120) g",
    );
    let target = primary.psql("postgres", "SELECT pg_catalog.pg_current_wal_lsn()");
    primary.psql(
        &env.db,
        "INSERT INTO users SELECT g, 'ghost' || g FROM generate_series(1001, 1100) g;
         UPDATE users SET name = 'never happened' WHERE id <= 40;
         DELETE FROM users WHERE id BETWEEN 41 AND 70;",
    );
    assert!(equal(&env, &primary), "{}", connector.log_text());
    // Everything up to the target is in the archive.
    let segment = primary.psql(
        "postgres",
        "SELECT pg_catalog.pg_walfile_name(pg_catalog.pg_switch_wal())",
    );
    let archived = wait_for(WAIT, || {
        (primary.psql(
            "postgres",
            &format!(
                "SELECT coalesce(last_archived_wal >= '{segment}', false) FROM pg_stat_archiver"
            ),
        ) == "t")
            .then_some(())
    });
    assert!(archived.is_some(), "{}", primary.server_log_tail());
    primary.restore_to(&backup, &target);
    primary.psql(
        &env.db,
        "INSERT INTO users SELECT g, 'restored ' || g FROM generate_series(2001, 2010) g",
    );
    assert!(equal(&env, &primary), "{}", connector.log_text());
    let log = connector.log_text();
    assert!(log.contains("left timeline 1 at"), "{log}");
    assert!(connector.is_running(), "{log}");
    assert_eq!(connector.stop(WAIT), Some(0), "{}", connector.log_text());
}

slotline_tests::both_shells!(
    a_restore_to_a_point_behind_what_was_delivered_is_repaired,
    a_promoted_server_without_the_slot_is_copied_again_naming_why,
    a_promotion_that_forked_behind_what_was_delivered_is_repaired,
    a_promotion_with_synchronized_standby_slots_streams_on,
    two_hosts_survive_the_death_of_the_primary,
);
