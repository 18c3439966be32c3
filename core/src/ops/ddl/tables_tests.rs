use super::super::render::{render_json, render_sql};
use super::*;
use crate::catalog::published::Published;
use crate::catalog::questions::QualifiedName;
use crate::pgoutput::{RelationColumn, ReplicaIdentity};
use crate::schema::program::parse_program_schema;
use crate::value::oid;
use crate::value::types::{Member, TypeKind};

const DOMAIN_NUMERIC: u32 = 60_001;
const ADDR: u32 = 60_002;
const MOOD: u32 = 60_003;
const CITEXT: u32 = 60_004;
const MOOD_ARRAY: u32 = 60_005;
const ADDR_ARRAY: u32 = 60_006;

/// A catalog as the startup's types query would describe these types.
fn types() -> PgTypes {
    let mut types = PgTypes::new();
    types.add(
        DOMAIN_NUMERIC,
        "money12",
        TypeKind::domain(oid::NUMERIC, (12 << 16 | 2) + 4),
    );
    types.add(
        ADDR,
        "addr",
        TypeKind::Composite {
            members: vec![
                Member::new("street", oid::TEXT),
                Member::new("Zip", oid::INT4),
            ],
        },
    );
    types.add(MOOD, "mood", TypeKind::Opaque { what: "enum" });
    types.add(CITEXT, "citext", TypeKind::Text);
    types.add(MOOD_ARRAY, "mood[]", TypeKind::array(MOOD));
    types.add(ADDR_ARRAY, "addr[]", TypeKind::array(ADDR));
    types
}

/// A column: name, type, modifier, NOT NULL, dimensions, key position.
type Col = (&'static str, u32, i32, bool, usize, Option<usize>);

fn described(schema: &str, table: &str, destination: Name, cols: &[Col]) -> Described {
    let key_source = match cols.iter().any(|c| c.5.is_some()) {
        true => KeySource::PrimaryKey,
        false => KeySource::None,
    };
    Described {
        route: Route {
            source: PgTable {
                schema: schema.into(),
                name: table.into(),
            },
            destination,
        },
        relation: Relation {
            oid: 16_400,
            namespace: schema.into(),
            name: table.into(),
            replica_identity: ReplicaIdentity::Default,
            columns: cols
                .iter()
                .map(|c| RelationColumn {
                    in_replica_identity: c.5.is_some(),
                    name: c.0.into(),
                    type_oid: c.1,
                    type_modifier: c.2,
                })
                .collect(),
        },
        columns: cols
            .iter()
            .map(|c| KeyColumn {
                name: c.0.into(),
                not_null: c.3,
                dimensions: c.4,
                key_position: c.5,
                generated: false,
            })
            .collect(),
        key_source,
        partitions: Vec::new(),
        published: Published::default(),
        left_out: Vec::new(),
    }
}

fn array(element: u32) -> u32 {
    oid::array_of(element).unwrap_or(0)
}

/// A table with a column of every type the type table of docs/guide/types.md maps.
fn every_type() -> Described {
    described(
        "public",
        "every_type",
        Name::unquoted("every_type"),
        &[
            ("id", oid::INT8, -1, true, 0, Some(1)),
            ("flag", oid::BOOL, -1, false, 0, None),
            ("small", oid::INT2, -1, false, 0, None),
            ("int", oid::INT4, -1, true, 0, None),
            ("an_oid", oid::OID, -1, false, 0, None),
            ("r", oid::FLOAT4, -1, false, 0, None),
            ("d", oid::FLOAT8, -1, false, 0, None),
            ("price", oid::NUMERIC, (10 << 16 | 2) + 4, false, 0, None),
            ("txt", oid::TEXT, -1, false, 0, None),
            ("vc", oid::VARCHAR, 20 + 4, false, 0, None),
            ("ch", oid::BPCHAR, 3 + 4, false, 0, None),
            ("nm", oid::NAME, -1, false, 0, None),
            ("c1", oid::CHAR, -1, false, 0, None),
            ("ci", CITEXT, -1, false, 0, None),
            ("bin", oid::BYTEA, -1, false, 0, None),
            ("day", oid::DATE, -1, false, 0, None),
            ("at", oid::TIME, -1, false, 0, None),
            ("ts", oid::TIMESTAMP, -1, false, 0, None),
            ("tstz", oid::TIMESTAMPTZ, -1, false, 0, None),
            ("u", oid::UUID, -1, false, 0, None),
            ("doc", oid::JSONB, -1, true, 0, None),
            ("money", DOMAIN_NUMERIC, -1, false, 0, None),
            ("home", ADDR, -1, false, 0, None),
            ("tags", array(oid::TEXT), -1, false, 1, None),
            ("grid", array(oid::INT4), -1, false, 2, None),
            ("homes", ADDR_ARRAY, -1, false, 1, None),
        ],
    )
}

fn sql(tables: &[Described]) -> String {
    let types = types();
    let planned: Vec<TableDdl> = tables.iter().map(|d| plan_table(d, &types)).collect();
    render_sql(&planned)
}

#[test]
fn every_mapped_type_gets_the_first_feldera_type_of_its_row() {
    insta::assert_snapshot!(sql(&[every_type()]));
}

#[test]
fn names_postgresql_needs_quoted_are_quoted_for_feldera_too() {
    let table = described(
        "Sales",
        "Order Items",
        Name::quoted("Order Items"),
        &[
            ("order", oid::INT8, -1, true, 0, Some(2)),
            ("LineNo", oid::INT4, -1, true, 0, Some(1)),
            ("unit price", oid::FLOAT8, -1, false, 0, None),
            ("select", oid::TEXT, -1, false, 0, None),
            ("say \"hi\"", oid::TEXT, -1, false, 0, None),
            ("plain_name2", oid::TEXT, -1, false, 0, None),
        ],
    );
    let reserved_table = described(
        "public",
        "user",
        Name::unquoted("user"),
        &[("id", oid::INT4, -1, true, 0, Some(1))],
    );
    insta::assert_snapshot!(sql(&[table, reserved_table]));
}

#[test]
fn lossy_columns_say_what_they_lose() {
    let table = described(
        "public",
        "lossy",
        Name::unquoted("lossy"),
        &[
            ("id", oid::INT4, -1, true, 0, Some(1)),
            ("amount", oid::NUMERIC, -1, false, 0, None),
            ("doc", oid::JSON, -1, false, 0, None),
            ("moods", MOOD_ARRAY, -1, false, 1, None),
        ],
    );
    insta::assert_snapshot!(sql(&[table]));
}

#[test]
fn types_only_varchar_accepts_are_declared_varchar_with_the_reason() {
    let table = described(
        "public",
        "refused",
        Name::unquoted("refused"),
        &[
            ("id", oid::INT4, -1, true, 0, Some(1)),
            ("span", oid::INTERVAL, -1, true, 0, None),
            ("feeling", MOOD, -1, false, 0, None),
            ("mystery", 99_999, -1, false, 0, None),
        ],
    );
    insta::assert_snapshot!(sql(&[table]));
}

#[test]
fn a_partitioned_table_is_declared_once_by_its_root() {
    let mut table = described(
        "public",
        "measurements",
        Name::unquoted("measurements"),
        &[
            ("city", oid::INT4, -1, true, 0, Some(1)),
            ("day", oid::DATE, -1, true, 0, Some(2)),
            ("celsius", oid::FLOAT4, -1, false, 0, None),
        ],
    );
    table.partitions = vec![
        PgTable {
            schema: "public".into(),
            name: "measurements_2024".into(),
        },
        PgTable {
            schema: "public".into(),
            name: "measurements_2025".into(),
        },
    ];
    insta::assert_snapshot!(sql(&[table]));
}

#[test]
fn a_table_without_a_key_says_what_slotline_needs_and_a_replica_identity_index_is_named() {
    let no_key = described(
        "public",
        "events",
        Name::unquoted("events"),
        &[("payload", oid::TEXT, -1, false, 0, None)],
    );
    let mut by_index = described(
        "public",
        "accounts",
        Name::unquoted("accounts"),
        &[
            ("email", oid::TEXT, -1, true, 0, Some(1)),
            ("name", oid::TEXT, -1, false, 0, None),
        ],
    );
    by_index.key_source = KeySource::ReplicaIdentityIndex;
    by_index.relation.replica_identity = ReplicaIdentity::Index;
    insta::assert_snapshot!(sql(&[no_key, by_index]));
}

#[test]
fn the_json_is_a_schema_slotline_maps_the_same_tables_onto() {
    let types = types();
    let tables = [every_type()];
    let planned: Vec<TableDdl> = tables.iter().map(|d| plan_table(d, &types)).collect();
    let text = render_json(&planned);
    let schema = match parse_program_schema(text.as_bytes()) {
        Ok(schema) => schema,
        Err(e) => panic!("the JSON is not a program schema: {e}\n{text}"),
    };
    let table = &schema.inputs[0];
    assert!(table.materialized);
    assert_eq!(table.primary_key, Some(vec![Name::unquoted("id")]));
    let mapping = plan_mapping(
        &tables[0].relation,
        table,
        &types,
        MappingOptions::default(),
    );
    let mapping = match mapping {
        Ok(mapping) => mapping,
        Err(e) => panic!("slotline refuses its own schema: {e}"),
    };
    assert!(mapping.skipped_columns.is_empty() && mapping.key_coverage.is_covered());
    insta::assert_snapshot!(text);
}

#[test]
fn key_columns_parse_with_their_key_source() {
    let rows: Vec<Vec<Option<&str>>> = vec![
        vec![
            Some("id"),
            Some("t"),
            Some("0"),
            Some("1"),
            Some("f"),
            Some("f"),
        ],
        vec![
            Some("tags"),
            Some("f"),
            Some("2"),
            None,
            Some("f"),
            Some("t"),
        ],
    ];
    let rows: Vec<Row<'_>> = rows.iter().map(Vec::as_slice).collect();
    let (columns, source) = parse_key_columns(&rows).unwrap();
    assert_eq!(source, KeySource::ReplicaIdentityIndex);
    assert!(!columns[0].generated && columns[1].generated);
    assert_eq!(columns[0].key_position, Some(1));
    assert_eq!(columns[1].dimensions, 2);
    assert!(parse_key_columns(&[&[Some("x")][..]]).is_err());
    assert!(key_columns_query("public", "a\0b").is_none());
}

#[test]
fn a_publication_routes_each_partition_to_its_root_once() {
    let name = |s: &str, t: &str| QualifiedName {
        schema: s.into(),
        table: t.into(),
    };
    let published = [
        PublishedTable {
            name: name("public", "m_2024"),
            ancestors: vec![name("public", "m"), name("public", "root")],
            ..Default::default()
        },
        PublishedTable {
            name: name("public", "m_2025"),
            ancestors: vec![name("public", "root")],
            ..Default::default()
        },
        PublishedTable {
            name: name("public", "Users"),
            ancestors: vec![],
            ..Default::default()
        },
    ];
    let routes = publication_routes(&published);
    let spelled: Vec<String> = routes
        .iter()
        .map(|r| format!("{} -> {}", r.source, r.destination))
        .collect();
    assert_eq!(
        spelled,
        ["public.root -> root", "public.\"Users\" -> \"Users\""]
    );
}

/// What the publication leaves out is said, not declared: the row filter as a comment, no
/// column for one its column list leaves out, and a generated column it does not publish
/// left to Feldera; a published generated column is declared and says so.
#[test]
fn the_publication_decides_the_columns_and_its_filter_is_a_comment() {
    use crate::catalog::published::RowFilter;
    let mut items = described(
        "public",
        "items",
        Name::unquoted("items"),
        &[
            ("sku", oid::INT4, -1, true, 0, Some(1)),
            ("price", oid::NUMERIC, -1, false, 0, None),
            ("total", oid::NUMERIC, -1, false, 0, None),
        ],
    );
    // `blob` left out by the column list, `half` generated and not published, `total`
    // generated and published.
    items.left_out = vec!["blob".into(), "half".into()];
    items.published = Published {
        columns: None,
        rows: RowFilter {
            table: Some("((sku % 3) <> 0)".into()),
            leaves: Vec::new(),
        },
    };
    let generated = |name: &str| KeyColumn {
        name: name.into(),
        not_null: false,
        dimensions: 0,
        key_position: None,
        generated: true,
    };
    items.columns.retain(|c| c.name != "total");
    items.columns.push(generated("total"));
    items.columns.push(KeyColumn {
        generated: false,
        ..generated("blob")
    });
    items.columns.push(generated("half"));
    let text = render_sql(&[plan_table(&items, &PgTypes::new())]);
    assert!(text.contains("-- row filter: the publication publishes only the rows of public.items where ((sku % 3) <> 0)"), "{text}");
    assert!(text.contains("leaves out blob of public.items"), "{text}");
    assert!(
        !text.contains("leaves out blob, half"),
        "a generated column is said apart: {text}"
    );
    assert!(
        text.contains("generated column(s) half of public.items are not published"),
        "{text}"
    );
    assert!(
        text.contains("a stored generated column the publication publishes"),
        "{text}"
    );
    assert!(
        !text.contains("    blob ") && !text.contains("    half "),
        "{text}"
    );
    insta::assert_snapshot!(text);
}
