use super::*;

fn row<'a>(values: &'a [Option<&'a str>]) -> Vec<Row<'a>> {
    vec![values]
}

const PRESENT: [Option<&str>; 15] = [
    Some("0/3000000"),
    Some("-1"),
    Some("slotline_p"),
    Some("t"),
    Some("4242"),
    Some("0/2000000"),
    Some("0/1000000"),
    Some("reserved"),
    None,
    Some("f"),
    None,
    Some("f"),
    Some(""),
    Some("f"),
    Some("off"),
];

#[test]
fn the_query_asks_only_for_columns_the_version_has() {
    let v15 = slot_health_query("s", 150_008).unwrap();
    assert!(
        !v15.contains("s.conflicting") && !v15.contains("s.failover"),
        "{v15}"
    );
    let v16 = slot_health_query("s", 160_004).unwrap();
    assert!(v16.contains("s.conflicting") && !v16.contains("s.invalidation_reason"));
    let v17 = slot_health_query("s", 170_000).unwrap();
    assert!(v17.contains("s.invalidation_reason") && v17.contains("s.failover"));
    assert!(slot_health_query("it's", 150_000)
        .unwrap()
        .contains("'it''s'"));
    assert_eq!(slot_health_query("nul\0", 150_000), None);
}

#[test]
fn a_present_slot_gives_lag_and_retained_wal() {
    let health = parse_slot_health(&row(&PRESENT)).unwrap();
    let slot = health.slot.as_ref().unwrap();
    assert!(slot.active);
    assert_eq!(slot.active_pid, Some(4242));
    assert_eq!(health.max_keep_bytes, None);
    assert_eq!(health.lag_bytes(), Some(0x100_0000));
    assert_eq!(health.retained_bytes(), Some(0x200_0000));
    assert_eq!(invalidation(slot), None);
    assert_eq!(
        slot.to_string(),
        "active (PostgreSQL backend pid 4242 streams it), confirmed_flush_lsn 0/2000000, restart_lsn 0/1000000, wal_status reserved, \
         safe_wal_size unlimited, failover false"
    );
}

#[test]
fn an_absent_slot_still_gives_the_servers_wal_position() {
    let mut values = [None; 15];
    values[0] = Some("0/16B3748");
    values[1] = Some("1024");
    let health = parse_slot_health(&row(&values)).unwrap();
    assert_eq!(health.slot, None);
    assert_eq!(health.current_wal, "0/16B3748".parse().unwrap());
    assert_eq!(health.max_keep_bytes, Some(1024 << 20));
    assert_eq!(health.lag_bytes(), None);
}

#[test]
fn malformed_answers_are_errors_never_guesses() {
    assert!(parse_slot_health(&[]).is_err());
    let mut values = PRESENT;
    values[3] = Some("yes");
    assert!(parse_slot_health(&row(&values)).is_err());
    let mut values = PRESENT;
    values[5] = Some("not an lsn");
    assert!(parse_slot_health(&row(&values)).is_err());
    assert!(parse_slot_health(&row(&PRESENT[..11])).is_err());
}

#[test]
fn a_slot_is_invalidated_by_any_of_the_three_signs() {
    let mut slot = parse_slot_health(&row(&PRESENT)).unwrap().slot.unwrap();
    slot.wal_status = Some("lost".into());
    assert_eq!(invalidation(&slot).as_deref(), Some("wal_status = lost"));
    slot.wal_status = Some("reserved".into());
    slot.conflicting = Some(true);
    slot.invalidation_reason = Some("rows_removed".into());
    assert_eq!(
        invalidation(&slot).as_deref(),
        Some("invalidation_reason = rows_removed, conflicting = true")
    );
    assert!(lost_action("slotline_p").contains("SNAPSHOT_MODE=initial"));
}

#[test]
fn retained_wal_warns_past_the_servers_limit_or_the_budget() {
    let mut health = parse_slot_health(&row(&PRESENT)).unwrap();
    // 32 MiB retained.
    assert_eq!(wal_warning(&health, WalBudget::default()), None);
    health.max_keep_bytes = Some(64 << 20);
    assert_eq!(
        wal_warning(&health, WalBudget::default()),
        None,
        "50% is fine"
    );
    health.max_keep_bytes = Some(40 << 20);
    let warning = wal_warning(&health, WalBudget::default()).unwrap();
    assert_eq!(
        warning,
        "the slot retains 32.0 MiB of WAL: 80% of max_slot_wal_keep_size (40.0 MiB)"
    );
    health.max_keep_bytes = None;
    let budget = WalBudget {
        warn_bytes: Some(16 << 20),
    };
    assert!(wal_warning(&health, budget)
        .unwrap()
        .contains("over SLOT_WAL_WARN_BYTES (16.0 MiB)"));
    let budget = WalBudget {
        warn_bytes: Some(64 << 20),
    };
    assert_eq!(wal_warning(&health, budget), None);
}

#[test]
fn an_exact_byte_count_adds_its_readable_size_only_when_that_says_more() {
    assert_eq!(bytes_exact(0), "0 bytes", "not `0 bytes (0 bytes)`");
    assert_eq!(bytes_exact(1023), "1023 bytes");
    assert_eq!(bytes_exact(3 << 20), "3145728 bytes (3.0 MiB)");
}
