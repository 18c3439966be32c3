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
        start_replication_command("s", "my pub", false).unwrap(),
        "START_REPLICATION SLOT \"s\" LOGICAL 0/0 (proto_version '1', publication_names '\"my pub\"')"
    );
    assert_eq!(
        start_replication_command("s", "p", true).unwrap(),
        "START_REPLICATION SLOT \"s\" LOGICAL 0/0 (proto_version '1', publication_names '\"p\"', messages 'true')"
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
fn publication_flags_are_read_and_absence_lists_the_others() {
    let row = |name: &'static str, all: &'static str| {
        vec![
            Some(name),
            Some(all),
            Some("t"),
            Some("t"),
            Some("t"),
            Some("f"),
            Some("t"),
        ]
    };
    let data = [row("pub", "f"), row("audit", "f")];
    let PublicationLookup::Found(publication) = parse_publication(&rows(&data), "pub").unwrap()
    else {
        panic!("pub is the first row");
    };
    assert!(publication.inserts && !publication.truncates && !publication.all_tables);
    assert!(publication.via_root);
    let missing = |existing: &[&str], more| PublicationLookup::Missing {
        existing: existing.iter().map(|n| (*n).to_owned()).collect(),
        more,
    };
    assert_eq!(parse_publication(&[], "pub").unwrap(), missing(&[], false));
    let data = [row("audit", "f"), row("Pub", "t")];
    assert_eq!(
        parse_publication(&rows(&data), "pub").unwrap(),
        missing(&["audit", "Pub"], false)
    );
    // The query asks for one more than it lists: that one only says there are more.
    let names: Vec<String> = (0..=PUBLICATIONS_LISTED)
        .map(|i| format!("p{i:02}"))
        .collect();
    let data: Vec<Vec<Option<&str>>> = names
        .iter()
        .map(|n| {
            let mut r = row("x", "f");
            r[0] = Some(n.as_str());
            r
        })
        .collect();
    let lookup = parse_publication(&rows(&data), "pub").unwrap();
    let listed: Vec<&str> = names[..PUBLICATIONS_LISTED]
        .iter()
        .map(String::as_str)
        .collect();
    assert_eq!(lookup, missing(&listed, true));
    let data = [vec![
        Some("pub"),
        Some("x"),
        Some("t"),
        Some("t"),
        Some("t"),
        Some("f"),
        Some("f"),
    ]];
    assert!(parse_publication(&rows(&data), "pub")
        .unwrap_err()
        .to_string()
        .contains("expected t or f"));
}

/// One row of `relation_query`'s answer: a column of relation `oid`, at `level` 0 (the
/// table) or as a partition (`leaf`, `parent`).
fn column_row<'a>(
    oid: &'a str,
    name: &'a str,
    column: &'a str,
    type_oid: &'a str,
    in_identity: &'a str,
    partition: Option<(&'a str, &'a str)>,
) -> Vec<Option<&'a str>> {
    let mut row = vec![
        Some(oid),
        Some("public"),
        Some(name),
        Some("d"),
        Some(column),
        Some(type_oid),
        Some("-1"),
        Some(in_identity),
    ];
    match partition {
        None => row.extend([Some("0"), None, None]),
        Some((leaf, parent)) => row.extend([Some("1"), Some(leaf), Some(parent)]),
    }
    // No row-level security.
    row.push(Some("f"));
    row
}

#[test]
fn relation_rows_become_a_relation_with_identity_flags() {
    let data = [
        column_row("16384", "users", "id", "20", "t", None),
        column_row("16384", "users", "name", "25", "f", None),
    ];
    let relation = parse_relation(&rows(&data)).unwrap();
    assert_eq!(
        (relation.oid, relation.replica_identity),
        (16384, ReplicaIdentity::Default)
    );
    assert_eq!(relation.columns.len(), 2);
    assert!(relation.columns[0].in_replica_identity && !relation.columns[1].in_replica_identity);
    assert_eq!(relation.columns[1].type_oid, 25);
    assert_eq!(parse_partitions(&rows(&data)).unwrap(), []);
    let short = [data[0][..8].to_vec()];
    assert!(parse_relation(&rows(&short))
        .unwrap_err()
        .to_string()
        .contains("row has 8 columns, expected 12"));
}

#[test]
fn the_partitions_of_a_table_come_after_it_each_in_its_own_column_order() {
    let data = [
        column_row("100", "metrics", "id", "20", "t", None),
        column_row("100", "metrics", "v", "25", "f", None),
        column_row("101", "metrics_a", "id", "20", "t", Some(("t", "100"))),
        column_row("101", "metrics_a", "v", "25", "f", Some(("t", "100"))),
        column_row("102", "metrics_b", "v", "25", "f", Some(("f", "100"))),
        column_row("102", "metrics_b", "id", "20", "t", Some(("f", "100"))),
    ];
    let relation = parse_relation(&rows(&data)).unwrap();
    assert_eq!(
        (relation.name.as_str(), relation.columns.len()),
        ("metrics", 2)
    );
    let partitions = parse_partitions(&rows(&data)).unwrap();
    let shapes: Vec<(u32, bool, u32, Vec<&str>)> = partitions
        .iter()
        .map(|p| {
            let columns = p.relation.columns.iter().map(|c| c.name.as_str()).collect();
            (p.relation.oid, p.leaf, p.parent, columns)
        })
        .collect();
    assert_eq!(
        shapes,
        [
            (101, true, 100, vec!["id", "v"]),
            (102, false, 100, vec!["v", "id"])
        ]
    );
    let mut disagreeing = data.to_vec();
    disagreeing[3][10] = Some("999");
    assert!(parse_partitions(&rows(&disagreeing))
        .unwrap_err()
        .to_string()
        .contains("the rows of relation 101 disagree"));
}

#[test]
fn row_security_is_named_for_each_relation_it_applies_to_once() {
    let mut data = vec![
        column_row("100", "metrics", "id", "20", "t", None),
        column_row("100", "metrics", "v", "25", "f", None),
        column_row("101", "metrics_a", "id", "20", "t", Some(("t", "100"))),
        column_row("101", "metrics_a", "v", "25", "f", Some(("t", "100"))),
        column_row("102", "metrics_b", "id", "20", "t", Some(("t", "100"))),
    ];
    assert_eq!(
        parse_row_security(&rows(&data)).unwrap(),
        Vec::<String>::new()
    );
    data[2][11] = Some("t");
    data[3][11] = Some("t");
    data[0][11] = Some("t");
    data[1][11] = Some("t");
    assert_eq!(
        parse_row_security(&rows(&data)).unwrap(),
        ["public.metrics", "public.metrics_a"]
    );
    data[4][11] = None;
    assert!(parse_row_security(&rows(&data))
        .unwrap_err()
        .to_string()
        .contains("column 11 is NULL"));
}

#[test]
fn published_tables_carry_their_ancestors_nearest_first() {
    let data = [
        vec![
            Some("public"),
            Some("metrics_2024_01"),
            Some("public"),
            Some("metrics_2024"),
            None,
            None,
        ],
        vec![
            Some("public"),
            Some("metrics_2024_01"),
            Some("public"),
            Some("metrics"),
            None,
            None,
        ],
        vec![
            Some("public"),
            Some("users"),
            None,
            None,
            Some(r#"["id", "Mixed \"Case\""]"#),
            Some("((id % 3) <> 0)"),
        ],
    ];
    let tables = parse_published_tables(&rows(&data)).unwrap();
    let shown: Vec<(String, Vec<String>)> = tables
        .iter()
        .map(|t| {
            let ancestors = t.ancestors.iter().map(ToString::to_string).collect();
            (t.to_string(), ancestors)
        })
        .collect();
    assert_eq!(
        shown,
        [
            (
                "public.metrics_2024_01".to_owned(),
                vec![
                    "public.metrics_2024".to_owned(),
                    "public.metrics".to_owned()
                ]
            ),
            ("public.users".to_owned(), vec![])
        ]
    );
    assert_eq!(tables[0].columns, None, "no answer: every column");
    assert_eq!(
        tables[1].columns.as_deref(),
        Some(&["id".to_owned(), "Mixed \"Case\"".to_owned()][..])
    );
    assert_eq!(tables[1].row_filter.as_deref(), Some("((id % 3) <> 0)"));
    let mut not_names = data[2].clone();
    not_names[4] = Some("{id,name}");
    assert!(parse_published_tables(&rows(&[not_names]))
        .unwrap_err()
        .to_string()
        .contains("not a list of names"));
    let mut short = data[2].clone();
    short.pop();
    assert!(parse_published_tables(&rows(&[short]))
        .unwrap_err()
        .to_string()
        .contains("expected 6"));
    let twice = [data[2].clone(), data[2].clone()];
    assert!(parse_published_tables(&rows(&twice))
        .unwrap_err()
        .to_string()
        .contains("listed twice"));
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

#[test]
fn a_timeline_history_is_read_line_by_line() {
    let content = "1\t0/14FB910\tno recovery target specified\n\n# a comment\n2\t0/3000028\tbefore 2026-12-04 10:00:00+00\n";
    let rows = [[Some("00000003.history"), Some(content)]];
    let rows: Vec<Row<'_>> = rows.iter().map(|r| &r[..]).collect();
    assert_eq!(
        parse_timeline_history(&rows).unwrap(),
        [
            TimelineSwitch {
                timeline: 1,
                switch_point: Lsn(0x14F_B910)
            },
            TimelineSwitch {
                timeline: 2,
                switch_point: Lsn(0x300_0028)
            },
        ]
    );
    let bad = [[Some("00000002.history"), Some("1 nowhere")]];
    let bad: Vec<Row<'_>> = bad.iter().map(|r| &r[..]).collect();
    assert!(parse_timeline_history(&bad)
        .unwrap_err()
        .to_string()
        .contains("nowhere"));
}
