use super::*;

fn rows<'a>(data: &'a [Vec<Option<&'a str>>]) -> Vec<Row<'a>> {
    data.iter().map(Vec::as_slice).collect()
}

#[test]
fn literals_and_identifiers_are_quoted_safely() {
    assert_eq!(quote_literal("it's").unwrap(), "'it''s'");
    assert_eq!(quote_ident("We\"ird").unwrap(), "\"We\"\"ird\"");
    assert_eq!(quote_literal("a\0b"), None);
    assert_eq!(quote_ident("a\0b"), None);
}

#[test]
fn replication_commands_spell_out_snapshot_and_protocol() {
    assert_eq!(
        create_slot_command("slotline_p", false).unwrap(),
        "CREATE_REPLICATION_SLOT \"slotline_p\" LOGICAL pgoutput (SNAPSHOT 'nothing')"
    );
    assert!(create_slot_command("s", true)
        .unwrap()
        .ends_with("(SNAPSHOT 'export')"));
    assert_eq!(
        start_replication_command("s", "my pub").unwrap(),
        "START_REPLICATION SLOT \"s\" LOGICAL 0/0 (proto_version '1', publication_names '\"my pub\"')"
    );
}

#[test]
fn identify_system_is_read() {
    let data = [vec![
        Some("7300000000000000001"),
        Some("1"),
        Some("0/1A2B3C8"),
        Some("app"),
    ]];
    let id = parse_identify_system(&rows(&data)).unwrap();
    assert_eq!(
        (id.timeline, id.xlogpos, id.database.as_deref()),
        (1, Lsn(0x1A2B3C8), Some("app"))
    );
    assert!(parse_identify_system(&[])
        .unwrap_err()
        .to_string()
        .contains("0 rows, expected 1"));
}

#[test]
fn publication_flags_are_read_and_absence_is_none() {
    let data = [vec![
        Some("pub"),
        Some("f"),
        Some("t"),
        Some("t"),
        Some("t"),
        Some("f"),
    ]];
    let publication = parse_publication(&rows(&data)).unwrap().unwrap();
    assert!(publication.inserts && !publication.truncates && !publication.all_tables);
    assert_eq!(parse_publication(&[]).unwrap(), None);
    let data = [vec![
        Some("pub"),
        Some("x"),
        Some("t"),
        Some("t"),
        Some("t"),
        Some("f"),
    ]];
    assert!(parse_publication(&rows(&data))
        .unwrap_err()
        .to_string()
        .contains("expected t or f"));
}

#[test]
fn relation_rows_become_a_relation_with_identity_flags() {
    let data = [
        vec![
            Some("16384"),
            Some("public"),
            Some("users"),
            Some("d"),
            Some("id"),
            Some("20"),
            Some("-1"),
            Some("t"),
        ],
        vec![
            Some("16384"),
            Some("public"),
            Some("users"),
            Some("d"),
            Some("name"),
            Some("25"),
            Some("-1"),
            Some("f"),
        ],
    ];
    let relation = parse_relation(&rows(&data)).unwrap();
    assert_eq!(
        (relation.oid, relation.replica_identity),
        (16384, ReplicaIdentity::Default)
    );
    assert_eq!(relation.columns.len(), 2);
    assert!(relation.columns[0].in_replica_identity && !relation.columns[1].in_replica_identity);
    assert_eq!(relation.columns[1].type_oid, 25);
}

#[test]
fn slot_rows_are_read_with_nullable_columns() {
    let data = [vec![
        Some("s"),
        Some("pgoutput"),
        Some("logical"),
        Some("app"),
        None,
        Some("0/16B3748"),
        Some("reserved"),
    ]];
    let slot = parse_slot(&rows(&data)).unwrap().unwrap();
    assert_eq!(
        (slot.active_pid, slot.confirmed_flush),
        (None, Some(Lsn(0x16B3748)))
    );
    assert_eq!(parse_slot(&[]).unwrap(), None);
}

#[test]
fn qualified_names_print_quoted_only_when_needed() {
    let q = |s: &str, t: &str| {
        QualifiedName {
            schema: s.into(),
            table: t.into(),
        }
        .to_string()
    };
    assert_eq!(q("public", "users"), "public.users");
    assert_eq!(q("public", "Users"), "public.\"Users\"");
    assert_eq!(q("my schema", "t1"), "\"my schema\".t1");
}
