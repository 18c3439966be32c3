//! The core's startup catalog questions, asked of a real PostgreSQL: the SQL is valid and
//! the answers parse into what the catalog says.

use slotline_core::catalog::questions::*;
use slotline_core::pgoutput::ReplicaIdentity;
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

/// The publication `name`, which must exist.
fn existing_publication(pg: &PgCluster, db: &str, name: &str) -> Publication {
    let sql = publication_query(name).unwrap();
    match ask(pg, db, &sql, |rows| parse_publication(rows, name)) {
        PublicationLookup::Found(publication) => publication,
        missing => panic!("{name}: {missing:?}"),
    }
}

fn server_version_num(pg: &PgCluster, db: &str) -> u32 {
    let rows = pg.query_rows(db, "SHOW server_version_num");
    rows[0][0].as_deref().unwrap().parse().unwrap()
}

/// What a publication publishes of each table, as the startup reads it: the column list
/// (by name, in attribute order), the row filter as PostgreSQL prints it, and generated
/// columns only where the server publishes them (18, `publish_generated_columns = stored`
/// or named in the list); `attnames` lists them on 15-17 although pgoutput never sends them.
#[test]
fn published_columns_and_row_filters_are_read_as_pgoutput_publishes_them() {
    let pg = PgCluster::start();
    let db = pg.create_database("catalog_fidelity");
    let v18 = server_version_num(&pg, &db) >= 180_000;
    pg.psql(
        &db,
        "CREATE TABLE users (id int PRIMARY KEY, name text, region text);
         CREATE TABLE items (sku int PRIMARY KEY, qty int, blob text, price numeric);
         CREATE TABLE g (id int PRIMARY KEY, a int, b int GENERATED ALWAYS AS (a * 2) STORED);
         ALTER TABLE items DROP COLUMN qty; ALTER TABLE items ADD COLUMN qty int;
         CREATE PUBLICATION p FOR TABLE users WHERE (id % 3 <> 0 AND region = 'eu'), items (sku, price, qty), g;",
    );
    if v18 {
        pg.psql(
            &db,
            "CREATE PUBLICATION gen FOR TABLE g WITH (publish_generated_columns = stored);
             CREATE PUBLICATION listed FOR TABLE g (id, b);",
        );
    }
    let published = |name: &str| {
        ask(
            &pg,
            &db,
            &published_tables_query(name).unwrap(),
            parse_published_tables,
        )
    };
    let p = published("p");
    let names = |t: &PublishedTable| t.columns.clone().unwrap_or_default().join(",");
    let shown: Vec<(String, String, Option<String>)> = p
        .iter()
        .map(|t| (t.to_string(), names(t), t.row_filter.clone()))
        .collect();
    assert_eq!(
        shown,
        [
            ("public.g".to_owned(), "id,a".to_owned(), None),
            ("public.items".to_owned(), "sku,price,qty".to_owned(), None),
            (
                "public.users".to_owned(),
                "id,name,region".to_owned(),
                Some("(((id % 3) <> 0) AND (region = 'eu'::text))".to_owned())
            ),
        ]
    );
    if v18 {
        assert_eq!(names(&published("gen")[0]), "id,a,b");
        assert_eq!(names(&published("listed")[0]), "id,b");
    }
    // The filter is valid SQL over the table, as the copy and the leftover check use it.
    pg.psql(
        &db,
        "INSERT INTO users SELECT n, 'u' || n, CASE WHEN n % 2 = 0 THEN 'eu' ELSE 'us' END \
         FROM generate_series(1, 12) n;",
    );
    let filter = p[2].row_filter.clone().unwrap();
    let kept = pg.query_rows(
        &db,
        &format!("SELECT count(*) FROM public.users AS t WHERE ({filter})"),
    );
    assert_eq!(kept[0][0].as_deref(), Some("4"), "2, 4, 8 and 10");
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

    let publication = existing_publication(&pg, &db, "p");
    assert!(publication.inserts && publication.deletes && !publication.truncates);
    // Another name: the publications there are, listed by name.
    pg.psql(&db, "CREATE PUBLICATION \"Audit\" FOR TABLE full_t;");
    assert_eq!(
        ask(&pg, &db, &publication_query("nope").unwrap(), |rows| {
            parse_publication(rows, "nope")
        }),
        PublicationLookup::Missing {
            existing: vec!["Audit".to_owned(), "p".to_owned()],
            more: false
        }
    );
    // The one asked for comes first whatever its name's place.
    assert_eq!(existing_publication(&pg, &db, "p").name, "p");
    pg.psql(&db, "DROP PUBLICATION \"Audit\";");

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
        &relation_query(&tables[2].name).unwrap(),
        parse_relation,
    );
    let cols: Vec<(&str, u32, bool)> = users
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.type_oid, c.in_replica_identity))
        .collect();
    assert_eq!(users.replica_identity, ReplicaIdentity::Default);
    if server_version_num(&pg, &db) >= 180_000 {
        // 18 can publish a stored generated column: the relation lists it, and the
        // publication's columns decide (this one publishes none: no
        // publish_generated_columns).
        assert_eq!(
            cols,
            [("id", 20, true), ("g", 23, false), ("email", 25, false)],
            "no dropped columns"
        );
        assert_eq!(
            tables[2].columns.as_deref(),
            Some(&["id".to_owned(), "email".to_owned()][..])
        );
    } else {
        assert_eq!(
            cols,
            [("id", 20, true), ("email", 25, false)],
            "no dropped or generated columns"
        );
    }

    let items = ask(
        &pg,
        &db,
        &relation_query(&tables[0].name).unwrap(),
        parse_relation,
    );
    assert_eq!(items.replica_identity, ReplicaIdentity::Index);
    assert_eq!(items.name, "Items");
    assert!(items.columns[0].in_replica_identity && !items.columns[1].in_replica_identity);

    let full = ask(
        &pg,
        &db,
        &relation_query(&tables[1].name).unwrap(),
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

/// The catalog of a partitioned table as a start reads it, against a real server: the
/// publication's `publish_via_partition_root`, the published leaves with their ancestors
/// (or the table itself, published via its root), every partition's shape in its own column
/// order, and the heaps a copy measures under a snapshot.
#[test]
fn partitioned_tables_are_read_with_their_partitions_at_every_depth() {
    use slotline_core::pgoutput::Relation;
    use slotline_core::snapshot::sql::{parse_sizes, sizes_query};
    let pg = PgCluster::start();
    let db = pg.create_database("catalog_parts");
    pg.psql(
        &db,
        "CREATE TABLE metrics (id bigint NOT NULL, ts date NOT NULL, v text, PRIMARY KEY (id, ts)) PARTITION BY RANGE (ts);
         CREATE TABLE metrics_2024 PARTITION OF metrics FOR VALUES FROM ('2024-01-01') TO ('2025-01-01') PARTITION BY RANGE (id);
         CREATE TABLE metrics_2024_low PARTITION OF metrics_2024 FOR VALUES FROM (0) TO (1000);
         CREATE TABLE metrics_2025 (v text, junk int, ts date NOT NULL, id bigint NOT NULL);
         ALTER TABLE metrics_2025 DROP COLUMN junk;
         ALTER TABLE metrics ATTACH PARTITION metrics_2025 FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
         CREATE TABLE metrics_rest PARTITION OF metrics DEFAULT;
         CREATE TABLE plain (id int PRIMARY KEY);
         INSERT INTO metrics SELECT g, '2025-03-01', 'x' FROM generate_series(1, 500) g;
         CREATE PUBLICATION leaves FOR TABLE metrics, plain;
         CREATE PUBLICATION roots FOR TABLE metrics, plain WITH (publish_via_partition_root = true);",
    );
    let leaves = existing_publication(&pg, &db, "leaves");
    let roots = existing_publication(&pg, &db, "roots");
    assert!(!leaves.via_root && roots.via_root);

    let shown = |tables: Vec<PublishedTable>| -> Vec<String> {
        tables
            .iter()
            .map(|t| {
                let ancestors: Vec<String> = t.ancestors.iter().map(ToString::to_string).collect();
                format!("{t} <- [{}]", ancestors.join(", "))
            })
            .collect()
    };
    let published = ask(
        &pg,
        &db,
        &published_tables_query("leaves").unwrap(),
        parse_published_tables,
    );
    assert_eq!(
        shown(published),
        [
            "public.metrics_2024_low <- [public.metrics_2024, public.metrics]",
            "public.metrics_2025 <- [public.metrics]",
            "public.metrics_rest <- [public.metrics]",
            "public.plain <- []",
        ]
    );
    let published = ask(
        &pg,
        &db,
        &published_tables_query("roots").unwrap(),
        parse_published_tables,
    );
    assert_eq!(
        shown(published),
        ["public.metrics <- []", "public.plain <- []"]
    );

    let metrics = QualifiedName {
        schema: "public".into(),
        table: "metrics".into(),
    };
    let sql = relation_query(&metrics).unwrap();
    let table = ask(&pg, &db, &sql, parse_relation);
    let partitions = ask(&pg, &db, &sql, parse_partitions);
    assert_eq!(table.name, "metrics");
    let columns = |r: &Relation| -> Vec<String> {
        r.columns
            .iter()
            .map(|c| format!("{}{}", c.name, if c.in_replica_identity { "*" } else { "" }))
            .collect()
    };
    assert_eq!(columns(&table), ["id*", "ts*", "v"]);
    let tree: Vec<(String, bool, bool, Vec<String>)> = partitions
        .iter()
        .map(|p| {
            let parent_is_root = p.parent == table.oid;
            (
                p.relation.name.clone(),
                p.leaf,
                parent_is_root,
                columns(&p.relation),
            )
        })
        .collect();
    assert_eq!(
        tree,
        [
            (
                "metrics_2024".to_owned(),
                false,
                true,
                vec!["id*".to_owned(), "ts*".into(), "v".into()]
            ),
            (
                "metrics_2024_low".to_owned(),
                true,
                false,
                vec!["id*".to_owned(), "ts*".into(), "v".into()]
            ),
            (
                "metrics_2025".to_owned(),
                true,
                true,
                vec!["v".to_owned(), "ts*".into(), "id*".into()]
            ),
            (
                "metrics_rest".to_owned(),
                true,
                true,
                vec!["id*".to_owned(), "ts*".into(), "v".into()]
            ),
        ],
        "every partition, in its own column order, without the dropped column"
    );
    let plain = QualifiedName {
        schema: "public".into(),
        table: "plain".into(),
    };
    assert_eq!(
        ask(&pg, &db, &relation_query(&plain).unwrap(), parse_partitions),
        []
    );

    let plain_relation = ask(&pg, &db, &relation_query(&plain).unwrap(), parse_relation);
    let heaps = pg.query_rows(&db, &sizes_query(&[&table, &plain_relation]).unwrap());
    let borrowed: Vec<Vec<Option<&str>>> = heaps
        .iter()
        .map(|r| r.iter().map(|c| c.as_deref()).collect())
        .collect();
    let rows: Vec<Row<'_>> = borrowed.iter().map(Vec::as_slice).collect();
    let heaps = parse_sizes(&rows, 2).unwrap();
    let listed: Vec<(usize, &str, bool)> = heaps
        .iter()
        .map(|h| (h.route, h.table.table.as_str(), h.blocks > 0))
        .collect();
    assert_eq!(
        listed,
        [
            (0, "metrics_2024_low", false),
            (0, "metrics_2025", true),
            (0, "metrics_rest", false),
            (1, "plain", false)
        ],
        "a partitioned table's heaps are its leaves; a table's is its own"
    );
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex from encode()"))
        .collect()
}

/// The column types question against real types: domains (over a domain too) resolve to
/// their base type and its modifier, arrays name their element, composites their members
/// without the dropped one, citext is text. And what pgoutput sends for such a table: the
/// Relation message carries a domain column's own (domain) OID and a modifier of -1, so the
/// base type can only come from the catalog.
#[test]
fn column_types_question_describes_domains_composites_arrays_and_citext() {
    use slotline_core::catalog::types::{parse_types, types_query};
    use slotline_core::pgoutput::{parse, Message};
    use slotline_core::value::types::TypeKind;

    let pg = PgCluster::start();
    let db = pg.create_database("coltypes");
    pg.psql(
        &db,
        "CREATE EXTENSION citext;
         CREATE DOMAIN money12 AS numeric(12,2);
         CREATE DOMAIN money12b AS money12 CHECK (VALUE > 0);
         CREATE TYPE mood AS ENUM ('sad', 'ok');
         CREATE TYPE addr AS (gone int, street text, zip int);
         ALTER TYPE addr DROP ATTRIBUTE gone;
         CREATE TABLE t (id int8 PRIMARY KEY, m money12b, a addr[], e mood[], c citext,
                         ip inet[], r int4range[], v int2vector);
         CREATE PUBLICATION p FOR TABLE t;",
    );
    pg.psql(
        &db,
        "SELECT pg_create_logical_replication_slot('types_s', 'pgoutput')",
    );
    pg.psql(&db, "INSERT INTO t (id) VALUES (1)");
    let relation = ask(
        &pg,
        &db,
        &relation_query(&QualifiedName {
            schema: "public".into(),
            table: "t".into(),
        })
        .unwrap(),
        parse_relation,
    );
    let oids: Vec<u32> = relation.columns.iter().map(|c| c.type_oid).collect();
    let oid_of = |name: &str| -> u32 {
        pg.psql(&db, &format!("SELECT '{name}'::regtype::oid"))
            .trim()
            .parse()
            .expect("an oid")
    };
    let types = ask(&pg, &db, &types_query(&oids[1..]), parse_types);

    let m = types.resolve(oid_of("money12b"), -1).unwrap();
    assert_eq!((m.oid, m.type_modifier), (1700, (12 << 16) + 2 + 4));
    let Some(TypeKind::Array { element, delimiter }) =
        types.get(oid_of("addr[]")).map(|t| t.kind.clone())
    else {
        panic!("addr[] is an array: {types:?}");
    };
    assert_eq!((element, delimiter), (oid_of("addr"), b','));
    let Some(TypeKind::Composite { members }) = types.get(element).map(|t| t.kind.clone()) else {
        panic!("addr is a composite: {types:?}");
    };
    let members: Vec<(&str, u32)> = members
        .iter()
        .map(|m| (m.name.as_str(), m.type_oid))
        .collect();
    assert_eq!(
        members,
        [("street", 25), ("zip", 23)],
        "without the dropped member"
    );
    assert_eq!(
        types.get(oid_of("citext")).map(|t| &t.kind),
        Some(&TypeKind::Text)
    );
    assert_eq!(types.name(oid_of("mood")), "mood (enum)");
    assert_eq!(types.name(oid_of("int4range")), "int4range (range)");
    assert_eq!(types.name(oid_of("inet")), "inet (base type)");
    assert_eq!(
        types.get(22).map(|t| &t.kind),
        Some(&TypeKind::Opaque { what: "base type" }),
        "int2vector is printed with spaces: not an array of int2"
    );

    let changes = pg.query_rows(
        &db,
        "SELECT encode(data, 'hex') FROM pg_logical_slot_peek_binary_changes('types_s', NULL, \
         NULL, 'proto_version', '1', 'publication_names', 'p')",
    );
    let sent = changes
        .iter()
        .filter_map(|row| row.first().cloned().flatten())
        .map(|hex| hex_bytes(&hex))
        .find_map(|bytes| match parse(&bytes) {
            Ok(Message::Relation(relation)) => Some(relation),
            _ => None,
        })
        .expect("a Relation message");
    let m = &sent.columns[1];
    assert_eq!(
        (m.type_oid, m.type_modifier),
        (oid_of("money12b"), -1),
        "pgoutput names the domain, without a modifier"
    );
    pg.psql(&db, "SELECT pg_drop_replication_slot('types_s')");
}

/// Which routed relations a role reads through row-level security, as the startup asks it
/// (`row_security_active` in `relation_query`): the policies of a table (or of a partition
/// the copy reads) apply to a role that is neither superuser, nor BYPASSRLS, nor the owner
/// of a table that does not force row security. With `row_security = off`, as slotline's
/// sessions run, such a read fails rather than returning fewer rows.
#[test]
fn row_level_security_is_named_for_the_roles_it_applies_to() {
    let pg = PgCluster::start();
    let db = pg.create_database("catalog_rls");
    pg.psql(
        &db,
        "CREATE ROLE rls_reader NOLOGIN; CREATE ROLE rls_owner NOLOGIN;
         CREATE ROLE rls_bypass NOLOGIN BYPASSRLS;
         CREATE TABLE secured (id int PRIMARY KEY, v text);
         INSERT INTO secured SELECT g, 'v' FROM generate_series(1, 10) g;
         ALTER TABLE secured OWNER TO rls_owner;
         ALTER TABLE secured ENABLE ROW LEVEL SECURITY;
         CREATE POLICY even ON secured FOR SELECT USING (id % 2 = 0);
         CREATE TABLE open (id int PRIMARY KEY);
         CREATE TABLE parts (id int PRIMARY KEY) PARTITION BY RANGE (id);
         CREATE TABLE parts_a PARTITION OF parts FOR VALUES FROM (0) TO (100);
         CREATE TABLE parts_b PARTITION OF parts FOR VALUES FROM (100) TO (200);
         ALTER TABLE parts_a ENABLE ROW LEVEL SECURITY;
         GRANT SELECT ON secured, open, parts, parts_a, parts_b TO rls_reader, rls_bypass;",
    );
    let named = |role: Option<&str>, table: &str| -> Vec<String> {
        let name = QualifiedName {
            schema: "public".into(),
            table: table.into(),
        };
        let question = relation_query(&name).unwrap();
        let sql = match role {
            Some(role) => format!("SET row_security = off; SET ROLE {role}; {question}"),
            None => question,
        };
        ask(&pg, &db, &sql, parse_row_security)
    };
    let none: Vec<String> = Vec::new();
    assert_eq!(named(None, "secured"), none, "a superuser bypasses it");
    assert_eq!(named(Some("rls_reader"), "secured"), ["public.secured"]);
    assert_eq!(named(Some("rls_reader"), "open"), none);
    assert_eq!(
        named(Some("rls_reader"), "parts"),
        ["public.parts_a"],
        "a partition the copy reads on its own is named"
    );
    assert_eq!(named(Some("rls_bypass"), "secured"), none);
    assert_eq!(named(Some("rls_owner"), "secured"), none);
    pg.psql(&db, "ALTER TABLE secured FORCE ROW LEVEL SECURITY");
    assert_eq!(
        named(Some("rls_owner"), "secured"),
        ["public.secured"],
        "an owner is held to a table that forces row security"
    );
    // As slotline's sessions read: row_security = off turns the filtered read into an error.
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pg.psql(
            &db,
            "SET row_security = off; SET ROLE rls_reader; COPY (SELECT id FROM secured) TO STDOUT",
        )
    }));
    let message = match read {
        Ok(rows) => panic!("the filtered read succeeded: {rows:?}"),
        Err(panic) => panic.downcast_ref::<String>().cloned().unwrap_or_default(),
    };
    assert!(
        message.contains("row-level security"),
        "the read fails naming row-level security: {message}"
    );
    let counted = pg.psql(&db, "SET ROLE rls_bypass; SELECT count(*) FROM secured");
    assert_eq!(counted, "10", "a role that bypasses it reads every row");
}
