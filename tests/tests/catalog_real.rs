//! The core's startup catalog questions, asked of a real PostgreSQL: the SQL is valid and
//! the answers parse into what the catalog says.

use slotline_core::pgoutput::ReplicaIdentity;
use slotline_core::startup::catalog::*;
use slotline_tests::pg::PgCluster;

fn ask<T>(
    pg: &PgCluster,
    db: &str,
    sql: &str,
    parse: impl FnOnce(&[Row<'_>]) -> Result<T, CatalogError>,
) -> T {
    let owned = pg.query_rows(db, sql);
    let borrowed: Vec<Vec<Option<&str>>> = owned
        .iter()
        .map(|r| r.iter().map(|c| c.as_deref()).collect())
        .collect();
    let rows: Vec<Row<'_>> = borrowed.iter().map(Vec::as_slice).collect();
    parse(&rows).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn catalog_questions_read_publications_tables_identities_and_slots() {
    let pg = PgCluster::start();
    let db = pg.create_database("catalog");
    pg.psql(
        &db,
        "CREATE TABLE users (id bigint PRIMARY KEY, name text, g int GENERATED ALWAYS AS (id * 2) STORED);
         ALTER TABLE users DROP COLUMN name; ALTER TABLE users ADD COLUMN email text;
         CREATE TABLE \"Items\" (sku text NOT NULL, qty int, UNIQUE (sku));
         ALTER TABLE \"Items\" REPLICA IDENTITY USING INDEX \"Items_sku_key\";
         CREATE TABLE full_t (a int, b text); ALTER TABLE full_t REPLICA IDENTITY FULL;
         CREATE TABLE none_t (a int); ALTER TABLE none_t REPLICA IDENTITY NOTHING;
         CREATE PUBLICATION p FOR TABLE users, \"Items\", full_t WITH (publish = 'insert, update, delete');",
    );

    let publication = ask(
        &pg,
        &db,
        &publication_query("p").unwrap(),
        parse_publication,
    )
    .unwrap();
    assert!(publication.inserts && publication.deletes && !publication.truncates);
    assert_eq!(
        ask(
            &pg,
            &db,
            &publication_query("nope").unwrap(),
            parse_publication
        ),
        None
    );

    let tables = ask(
        &pg,
        &db,
        &published_tables_query("p").unwrap(),
        parse_published_tables,
    );
    let names: Vec<String> = tables.iter().map(ToString::to_string).collect();
    assert_eq!(names, ["public.\"Items\"", "public.full_t", "public.users"]);

    let users = ask(
        &pg,
        &db,
        &relation_query(&tables[2]).unwrap(),
        parse_relation,
    );
    let cols: Vec<(&str, u32, bool)> = users
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.type_oid, c.in_replica_identity))
        .collect();
    assert_eq!(users.replica_identity, ReplicaIdentity::Default);
    assert_eq!(
        cols,
        [("id", 20, true), ("email", 25, false)],
        "no dropped or generated columns"
    );

    let items = ask(
        &pg,
        &db,
        &relation_query(&tables[0]).unwrap(),
        parse_relation,
    );
    assert_eq!(items.replica_identity, ReplicaIdentity::Index);
    assert_eq!(items.name, "Items");
    assert!(items.columns[0].in_replica_identity && !items.columns[1].in_replica_identity);

    let full = ask(
        &pg,
        &db,
        &relation_query(&tables[1]).unwrap(),
        parse_relation,
    );
    assert!(full.columns.iter().all(|c| c.in_replica_identity));

    let none = QualifiedName {
        schema: "public".into(),
        table: "none_t".into(),
    };
    let none = ask(&pg, &db, &relation_query(&none).unwrap(), parse_relation);
    assert_eq!(none.replica_identity, ReplicaIdentity::Nothing);
    assert!(none.columns.iter().all(|c| !c.in_replica_identity));

    assert_eq!(ask(&pg, &db, &slot_query("s1").unwrap(), parse_slot), None);
    pg.psql(
        &db,
        "SELECT pg_create_logical_replication_slot('s1', 'pgoutput')",
    );
    let slot = ask(&pg, &db, &slot_query("s1").unwrap(), parse_slot).unwrap();
    assert_eq!(
        (slot.plugin.as_deref(), slot.slot_type.as_str()),
        (Some("pgoutput"), "logical")
    );
    assert!(slot.confirmed_flush.is_some() && slot.active_pid.is_none());
    pg.psql(&db, "SELECT pg_drop_replication_slot('s1')");
}
