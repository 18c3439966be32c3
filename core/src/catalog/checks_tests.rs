use super::*;
use crate::contract::routes::parse_tables;
use crate::pgoutput::{RelationColumn, ReplicaIdentity};
use crate::schema::program::parse_program_schema;
use crate::value::PgTypes;
use crate::Lsn;

fn q(table: &str) -> QualifiedName {
    QualifiedName {
        schema: "public".into(),
        table: table.into(),
    }
}

/// A published table that is not a partition.
fn t(table: &str) -> PublishedTable {
    PublishedTable {
        name: q(table),
        ancestors: Vec::new(),
        ..Default::default()
    }
}

/// A published partition, with its ancestors nearest first.
fn part(table: &str, ancestors: &[&str]) -> PublishedTable {
    PublishedTable {
        name: q(table),
        ancestors: ancestors.iter().map(|a| q(a)).collect(),
        ..Default::default()
    }
}

fn publication(truncates: bool, updates: bool) -> Publication {
    Publication {
        name: "p".into(),
        all_tables: false,
        inserts: true,
        updates,
        deletes: true,
        truncates,
        via_root: false,
    }
}

#[test]
fn pinned_settings_must_be_reported_back() {
    assert!(pinned_settings("ISO, MDY", "UTC", "postgres", "UTF8").is_ok());
    let err = pinned_settings("ISO, MDY", "Asia/Kolkata", "postgres", "UTF8").unwrap_err();
    assert!(err.message.contains("TimeZone=\"Asia/Kolkata\""), "{err}");
}

#[test]
fn missing_publication_is_refused_and_gaps_are_warnings() {
    let err = publication_check("p", &[], false);
    assert!(
        err.contains("\"p\" does not exist")
            && err.contains("this database has no publication")
            && err.contains("CREATE PUBLICATION p"),
        "{err}"
    );
    let (_, warnings) = super::publication("p", found(publication(false, false))).unwrap();
    assert_eq!(warnings.len(), 2);
    assert!(warnings[0].contains("does not publish update"));
    assert!(warnings[1].contains("TRUNCATE"));
    let (publication, warnings) = super::publication("p", found(publication(true, true))).unwrap();
    assert!(warnings.is_empty() && publication.truncates);
}

#[test]
fn missing_publication_names_the_ones_that_exist() {
    let err = publication_check("p", &["audit", "P"], false);
    assert!(
        err.contains("\"p\" does not exist in this database, which has \"audit\", \"P\";")
            && err.contains("set PG_PUBLICATION to one of them")
            && err.contains("CREATE PUBLICATION p"),
        "{err}"
    );
    let err = publication_check("p", &["audit"], true);
    assert!(err.contains("which has \"audit\" and more;"), "{err}");
}

fn found(publication: Publication) -> PublicationLookup {
    PublicationLookup::Found(publication)
}

fn publication_check(name: &str, existing: &[&str], more: bool) -> String {
    let lookup = PublicationLookup::Missing {
        existing: existing.iter().map(|n| (*n).to_owned()).collect(),
        more,
    };
    super::publication(name, lookup).unwrap_err().message
}

#[test]
fn routes_and_publication_must_match_both_ways() {
    let routes = parse_tables("users,items").unwrap();
    assert!(routes_match_publication("p", &routes, &[t("items"), t("users")]).is_ok());
    let err = routes_match_publication("p", &routes, &[t("users"), t("audit")]).unwrap_err();
    insta::assert_snapshot!(err.message, @"the publication and TABLES disagree; routed but not in publication p: public.items; in publication p but not routed (add them to TABLES; for a partition, route its partitioned table): public.audit. The publication has: [public.users, public.audit]; TABLES routes: [public.users, public.items]");
}

#[test]
fn a_partitioned_table_is_routed_by_its_own_name_whichever_way_it_is_published() {
    let routes = parse_tables("metrics").unwrap();
    // publish_via_partition_root = true: the catalog lists the table itself.
    assert!(routes_match_publication("p", &routes, &[t("metrics")]).is_ok());
    // false: its leaves, at any depth, and not the table.
    let leaves = [
        part("metrics_2024_01", &["metrics_2024", "metrics"]),
        part("metrics_2025", &["metrics"]),
        part("metrics_default", &["metrics"]),
    ];
    assert!(routes_match_publication("p", &routes, &leaves).is_ok());
    let routes = parse_tables("metrics_2025,metrics_default").unwrap();
    let err = routes_match_publication("p", &routes, &leaves).unwrap_err();
    assert!(
        err.message.contains("not routed (add them to TABLES; for a partition, route its partitioned table): public.metrics_2024_01"),
        "{err}"
    );
}

fn partition(oid: u32, name: &str, leaf: bool, parent: u32) -> Partition {
    Partition {
        relation: Relation {
            oid,
            namespace: "public".into(),
            name: name.into(),
            replica_identity: ReplicaIdentity::Default,
            columns: Vec::new(),
        },
        leaf,
        parent,
    }
}

/// metrics (100): metrics_2024 (101, partitioned: 111), metrics_2025 (102).
fn metrics_tree() -> Vec<Partition> {
    vec![
        partition(101, "metrics_2024", false, 100),
        partition(111, "metrics_2024_01", true, 101),
        partition(102, "metrics_2025", true, 100),
    ]
}

#[test]
fn every_leaf_of_a_routed_partitioned_table_must_be_published_by_itself_or_above_it() {
    let routes = parse_tables("metrics").unwrap();
    let tree = metrics_tree();
    let fits =
        |published: &[PublishedTable]| partitions_fit("p", &routes, 0, 100, &tree, published);
    assert!(fits(&[t("metrics")]).is_ok(), "via the root");
    assert!(fits(&[
        part("metrics_2024_01", &["metrics_2024", "metrics"]),
        part("metrics_2025", &["metrics"])
    ])
    .is_ok());
    assert!(
        fits(&[
            part("metrics_2024", &["metrics"]),
            part("metrics_2025", &["metrics"])
        ])
        .is_ok(),
        "through a partitioned partition"
    );
    let err = fits(&[part("metrics_2025", &["metrics"])]).unwrap_err();
    insta::assert_snapshot!(err.message, @"public.metrics is routed but its partition(s) public.metrics_2024_01 are not in publication p: the initial copy would hold their rows and the stream would never update them; publish the whole table (ALTER PUBLICATION p ADD TABLE public.metrics) or route another table");
}

#[test]
fn a_partition_routed_beside_its_partitioned_table_is_refused() {
    let routes = parse_tables("metrics,metrics_2025").unwrap();
    let err = partitions_fit("p", &routes, 0, 100, &metrics_tree(), &[t("metrics")]).unwrap_err();
    insta::assert_snapshot!(err.message, @"public.metrics is partitioned and its partition(s) public.metrics_2025 are routed too, so their rows would have two destinations; route only public.metrics (the rows of every partition go to its Feldera table)");
}

#[test]
fn the_partition_publishing_line_says_what_the_setting_means() {
    let tables = ["public.metrics".to_owned()];
    insta::assert_snapshot!(partition_publishing("p", true, &tables), @"publication p has publish_via_partition_root = true: rows of every partition arrive as rows of public.metrics; PostgreSQL publishes no TRUNCATE of a single partition (Feldera keeps that partition's rows)");
    insta::assert_snapshot!(partition_publishing("p", false, &tables), @"publication p has publish_via_partition_root = false: rows arrive under each partition and go to the route of public.metrics; a partition attached later ends the session once to read the catalog again; a TRUNCATE of only some partitions stops the stream (exit 1)");
    insta::assert_snapshot!(partition_publishing("p", false, &[]), @"publication p has publish_via_partition_root = false; no routed table is partitioned, so it changes nothing");
}

const SCHEMA: &str = r#"{"inputs":[
 {"name":"users","case_sensitive":false,"primary_key":["id"],"materialized":false,"properties":{},
  "fields":[{"name":"id","case_sensitive":false,"columntype":{"type":"BIGINT","nullable":false}},
            {"name":"email","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":true,"precision":-1}}]},
 {"name":"nokey","case_sensitive":false,"materialized":false,"properties":{},
  "fields":[{"name":"a","case_sensitive":false,"columntype":{"type":"INTEGER","nullable":true}}]}
],"outputs":[]}"#;

fn users_relation(identity: ReplicaIdentity, id_in_identity: bool) -> Relation {
    Relation {
        oid: 1,
        namespace: "public".into(),
        name: "users".into(),
        replica_identity: identity,
        columns: vec![
            RelationColumn {
                in_replica_identity: id_in_identity,
                name: "id".into(),
                type_oid: 20,
                type_modifier: -1,
            },
            RelationColumn {
                in_replica_identity: false,
                name: "email".into(),
                type_oid: 25,
                type_modifier: -1,
            },
        ],
    }
}

#[test]
fn routes_plan_mappings_and_refuse_unusable_identities() {
    let schema = parse_program_schema(SCHEMA.as_bytes()).unwrap();
    let routes = parse_tables("users").unwrap();
    let planned = plan_routes(
        &routes,
        &[users_relation(ReplicaIdentity::Default, true)],
        &PgTypes::new(),
        &schema,
        true,
    )
    .unwrap();
    assert_eq!(planned.mappings.len(), 1);
    let err = plan_routes(
        &routes,
        &[users_relation(ReplicaIdentity::Nothing, false)],
        &PgTypes::new(),
        &schema,
        true,
    )
    .unwrap_err();
    assert!(err.message.contains("NOTHING"), "{err}");
    let err = plan_routes(
        &routes,
        &[users_relation(ReplicaIdentity::Default, false)],
        &PgTypes::new(),
        &schema,
        true,
    )
    .unwrap_err();
    assert!(err.message.contains("not in the replica identity"), "{err}");
}

#[test]
fn every_leaf_must_map_by_column_name_and_carry_the_key_in_its_own_identity() {
    let schema = parse_program_schema(SCHEMA.as_bytes()).unwrap();
    let routes = parse_tables("users").unwrap();
    let planned = plan_routes(
        &routes,
        &[users_relation(ReplicaIdentity::Default, true)],
        &PgTypes::new(),
        &schema,
        true,
    )
    .unwrap();
    let leaf = |name: &str, identity: ReplicaIdentity| {
        let mut relation = users_relation(identity, identity != ReplicaIdentity::Nothing);
        relation.name = name.into();
        relation.columns.reverse();
        Partition {
            relation,
            leaf: true,
            parent: 1,
        }
    };
    let reordered = vec![vec![leaf("users_a", ReplicaIdentity::Default)]];
    assert!(plan_partitions(&planned.tables, &reordered, &PgTypes::new(), true).is_ok());
    let nothing = vec![vec![
        leaf("users_a", ReplicaIdentity::Default),
        leaf("users_b", ReplicaIdentity::Nothing),
    ]];
    let err = plan_partitions(&planned.tables, &nothing, &PgTypes::new(), true).unwrap_err();
    assert!(
        err.message
            .starts_with("public.users_b -> users: REPLICA IDENTITY is NOTHING"),
        "{err}"
    );
}

#[test]
fn table_without_primary_key_is_refused_unless_allowed() {
    let schema = parse_program_schema(SCHEMA.as_bytes()).unwrap();
    let routes = parse_tables("nokey").unwrap();
    let relation = Relation {
        oid: 2,
        namespace: "public".into(),
        name: "nokey".into(),
        replica_identity: ReplicaIdentity::Full,
        columns: vec![RelationColumn {
            in_replica_identity: true,
            name: "a".into(),
            type_oid: 23,
            type_modifier: -1,
        }],
    };
    let err = plan_routes(
        &routes,
        std::slice::from_ref(&relation),
        &PgTypes::new(),
        &schema,
        true,
    )
    .unwrap_err();
    assert!(err.message.contains("PRIMARY KEY"), "{err}");
    assert!(plan_routes(&routes, &[relation], &PgTypes::new(), &schema, false).is_ok());
}

#[test]
fn unknown_destination_lists_the_tables_that_exist() {
    let schema = parse_program_schema(SCHEMA.as_bytes()).unwrap();
    let routes = parse_tables("users:people").unwrap();
    let err = plan_routes(
        &routes,
        &[users_relation(ReplicaIdentity::Default, true)],
        &PgTypes::new(),
        &schema,
        true,
    )
    .unwrap_err();
    assert!(
        err.message.contains("people")
            && err.message.contains("users")
            && err.message.contains("nokey"),
        "{err}"
    );
}

fn slot(plugin: &str, database: &str, active_pid: Option<u32>, wal_status: &str) -> SlotInfo {
    SlotInfo {
        name: "s".into(),
        plugin: Some(plugin.into()),
        slot_type: "logical".into(),
        database: Some(database.into()),
        active_pid,
        confirmed_flush: Some(Lsn(1)),
        wal_status: Some(wal_status.into()),
    }
}

#[test]
fn existing_slots_must_be_ours_and_a_busy_one_is_reported() {
    assert!(existing_slot(&slot("pgoutput", "app", None, "reserved"), "app").is_ok());
    assert!(
        existing_slot(&slot("test_decoding", "app", None, "reserved"), "app")
            .unwrap_err()
            .message
            .contains("pgoutput")
    );
    assert!(
        existing_slot(&slot("pgoutput", "other", None, "reserved"), "app")
            .unwrap_err()
            .message
            .contains("other")
    );
    assert!(existing_slot(&slot("pgoutput", "app", Some(42), "reserved"), "app").is_ok());
    assert!(slot_in_use(&slot("pgoutput", "app", Some(42), "reserved"))
        .unwrap()
        .contains("backend pid 42"));
    assert_eq!(
        slot_in_use(&slot("pgoutput", "app", None, "reserved")),
        None
    );
    // Whether a lost slot is replaced or refused is the startup plan's decision.
    assert!(existing_slot(&slot("pgoutput", "app", None, "lost"), "app").is_ok());
}

#[test]
fn server_versions_before_15_are_refused_naming_the_version_and_failover_needs_17() {
    assert_eq!(
        server_version("15.8 (Debian 15.8-0+deb12u1)", false),
        Ok(())
    );
    assert_eq!(server_version("18.4", true), Ok(()));
    assert_eq!(server_version("", true), Ok(()), "unreported: not refused");
    let old = server_version("14.12", false).unwrap_err().message;
    assert_eq!(
        old,
        "PostgreSQL 14.12 is not supported: slotline needs PostgreSQL 15 or newer"
    );
    let failover = server_version("16.4", true).unwrap_err().message;
    assert!(
        failover.contains("PG_SLOT_FAILOVER=true needs PostgreSQL 17") && failover.contains("16.4"),
        "{failover}"
    );
    assert!(server_version("devel", false).is_err());
}

#[test]
fn every_refusal_says_how_to_fix_it_and_prints_the_fix_after_its_message() {
    let routes = parse_tables("users,items").unwrap();
    let fixes = [
        (
            pinned_settings("ISO", "Asia/Kolkata", "postgres", "UTF8").unwrap_err(),
            SESSION_SETTINGS_FIX.to_owned(),
        ),
        (
            server_version("14.12", false).unwrap_err(),
            SERVER_VERSION_FIX.to_owned(),
        ),
        (
            super::publication(
                "p",
                PublicationLookup::Missing {
                    existing: Vec::new(),
                    more: false,
                },
            )
            .unwrap_err(),
            publication_fix("p"),
        ),
        (
            routes_match_publication("p", &routes, &[t("users")]).unwrap_err(),
            tables_fix("p"),
        ),
        (
            existing_slot(&slot("test_decoding", "app", None, "reserved"), "app").unwrap_err(),
            SLOT_FIX.to_owned(),
        ),
    ];
    for (refusal, fix) in fixes {
        assert_eq!(refusal.fix.as_deref(), Some(fix.as_str()), "{refusal}");
        assert_eq!(
            refusal.to_string(),
            format!("{} (fix: {fix})", refusal.message)
        );
    }
    insta::assert_snapshot!(tables_fix("p"), @"make TABLES and the publication agree (ALTER PUBLICATION p ADD TABLE / DROP TABLE ..., or change TABLES)");
    // A verdict's fix wins over the question's; a refusal without one takes it.
    let own = Refusal::new("m")
        .with_fix("own")
        .or_fix(Some("question's".into()));
    assert_eq!(own.fix.as_deref(), Some("own"));
    let none = Refusal::new("m").or_fix(Some("question's".into()));
    assert_eq!(none.to_string(), "m (fix: question's)");
    assert_eq!(Refusal::new("m").to_string(), "m");
}
