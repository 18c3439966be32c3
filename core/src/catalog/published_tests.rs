use super::*;
use crate::pgoutput::{RelationColumn, ReplicaIdentity};

fn q(table: &str) -> QualifiedName {
    QualifiedName {
        schema: "public".into(),
        table: table.into(),
    }
}

fn entry(
    table: &str,
    ancestors: &[&str],
    columns: Option<&[&str]>,
    filter: Option<&str>,
) -> PublishedTable {
    PublishedTable {
        name: q(table),
        ancestors: ancestors.iter().map(|a| q(a)).collect(),
        columns: columns.map(|c| c.iter().map(|s| (*s).to_owned()).collect()),
        row_filter: filter.map(str::to_owned),
    }
}

fn relation(name: &str, columns: &[&str]) -> Relation {
    Relation {
        oid: 1,
        namespace: "public".into(),
        name: name.into(),
        replica_identity: ReplicaIdentity::Default,
        columns: columns
            .iter()
            .map(|c| RelationColumn {
                in_replica_identity: *c == "id",
                name: (*c).into(),
                type_oid: 23,
                type_modifier: -1,
            })
            .collect(),
    }
}

fn leaf(name: &str, columns: &[&str]) -> Partition {
    Partition {
        relation: relation(name, columns),
        leaf: true,
        parent: 1,
    }
}

#[test]
fn a_column_list_narrows_the_relation_and_names_what_it_leaves_out() {
    let published_tables = [
        entry("items", &[], Some(&["sku", "qty", "price"]), None),
        entry(
            "users",
            &[],
            Some(&["id", "name", "region"]),
            Some("((id % 3) <> 0)"),
        ),
    ];
    let items = published(&q("items"), &published_tables, &[]).unwrap();
    let mut shape = relation("items", &["sku", "qty", "price", "blob"]);
    assert_eq!(narrow(&mut shape, &items), ["blob"]);
    let names: Vec<&str> = shape.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["sku", "qty", "price"]);
    assert!(items.rows.is_empty());

    let users = published(&q("users"), &published_tables, &[]).unwrap();
    assert_eq!(users.rows.for_heap(&q("users")), Some("((id % 3) <> 0)"));
    assert_eq!(users.rows.predicate().as_deref(), Some("(((id % 3) <> 0))"));
    let mut shape = relation("users", &["id", "name", "region"]);
    assert!(narrow(&mut shape, &users).is_empty());
    assert_eq!(shape.columns.len(), 3);
}

#[test]
fn an_answer_without_columns_publishes_every_column() {
    let all = published(&q("t"), &[entry("t", &[], None, None)], &[]).unwrap();
    let mut shape = relation("t", &["id", "a"]);
    assert!(narrow(&mut shape, &all).is_empty());
    assert_eq!(shape.columns.len(), 2);
}

#[test]
fn the_roots_filter_applies_to_every_partition_under_publish_via_partition_root() {
    let tables = [entry("m", &[], Some(&["id", "region"]), Some("(id > 10)"))];
    let partitions = [leaf("m_eu", &["region", "id", "secret"])];
    let m = published(&q("m"), &tables, &partitions).unwrap();
    assert_eq!(m.rows.for_heap(&q("m_eu")), Some("(id > 10)"));
    let mut shape = partitions[0].relation.clone();
    assert_eq!(narrow(&mut shape, &m), ["secret"]);
}

#[test]
fn leaves_published_by_themselves_keep_their_own_filters() {
    let tables = [
        entry("m_eu", &["m"], Some(&["id", "region"]), Some("(id > 3)")),
        entry("m_us", &["m"], Some(&["region", "id"]), None),
    ];
    let partitions = [
        leaf("m_eu", &["id", "region", "secret"]),
        leaf("m_us", &["region", "id", "secret"]),
    ];
    let m = published(&q("m"), &tables, &partitions).unwrap();
    assert_eq!(m.rows.for_heap(&q("m_eu")), Some("(id > 3)"));
    assert_eq!(m.rows.for_heap(&q("m_us")), None);
    assert_eq!(
        m.rows.predicate().as_deref(),
        Some(
            r#"(tableoid <> ALL (ARRAY['"public"."m_eu"'::regclass]) OR (tableoid = '"public"."m_eu"'::regclass AND ((id > 3))))"#
        )
    );
    assert_eq!(m.rows.describe(), "public.m_eu: (id > 3)");
    let mut shape = relation("m", &["id", "region", "secret"]);
    assert_eq!(narrow(&mut shape, &m), ["secret"]);
}

#[test]
fn leaves_with_different_column_lists_are_refused_naming_both() {
    let tables = [
        entry("m_eu", &["m"], Some(&["id", "region"]), None),
        entry("m_us", &["m"], Some(&["id", "region", "secret"]), None),
    ];
    let partitions = [
        leaf("m_eu", &["id", "region", "secret"]),
        leaf("m_us", &["id", "region", "secret"]),
    ];
    let refusal = published(&q("m"), &tables, &partitions).unwrap_err();
    assert!(refusal.contains("public.m_eu: id, region"), "{refusal}");
    assert!(
        refusal.contains("public.m_us: id, region, secret"),
        "{refusal}"
    );
    assert!(
        refusal.contains("publish_via_partition_root = true"),
        "{refusal}"
    );
}
