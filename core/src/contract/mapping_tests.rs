use super::*;
use crate::pgoutput::RelationColumn;
use crate::schema::{Field, SqlType};
use crate::value::PgTypes;
use insta::assert_snapshot;

const BOOL: u32 = 16;
const INT8: u32 = 20;
const INT4: u32 = 23;
const TEXT: u32 = 25;

fn relation(identity: ReplicaIdentity, columns: &[(&str, u32, bool)]) -> Relation {
    Relation {
        oid: 16384,
        namespace: "public".into(),
        name: "users".into(),
        replica_identity: identity,
        columns: columns
            .iter()
            .map(|(name, type_oid, in_identity)| RelationColumn {
                in_replica_identity: *in_identity,
                name: (*name).into(),
                type_oid: *type_oid,
                type_modifier: -1,
            })
            .collect(),
    }
}

fn field(name: Name, sql: SqlType, nullable: bool) -> Field {
    Field::new(name, ColumnType::new(sql, nullable))
}

fn table(fields: Vec<Field>, key: Option<&[&str]>) -> Table {
    Table {
        name: Name::unquoted("users"),
        primary_key: key.map(|k| k.iter().map(|n| Name::unquoted(n)).collect()),
        fields,
        materialized: false,
    }
}

fn users_table() -> Table {
    table(
        vec![
            field(Name::unquoted("id"), SqlType::BigInt, false),
            field(Name::unquoted("name"), SqlType::Varchar, true),
        ],
        Some(&["id"]),
    )
}

const STRICT: MappingOptions = MappingOptions {
    require_primary_key: true,
};

fn columns_of(mapping: &ColumnMapping) -> Vec<Option<usize>> {
    mapping
        .fields
        .iter()
        .map(|f| f.source.as_ref().map(|s| s.column))
        .collect()
}

#[test]
fn fields_follow_schema_order_with_column_indices_plans_and_key() {
    let rel = relation(
        ReplicaIdentity::Default,
        &[("name", TEXT, false), ("id", INT8, true)],
    );
    let mapping = plan_mapping(&rel, &users_table(), &PgTypes::new(), STRICT).unwrap();
    assert_eq!(columns_of(&mapping), vec![Some(1), Some(0)]);
    assert_eq!(mapping.fields[0].json_key, "\"id\"");
    assert!(!mapping.fields[0].nullable);
    let plans: Vec<u32> = mapping
        .fields
        .iter()
        .filter_map(|f| f.source.as_ref().map(|s| s.plan.pg_type))
        .collect();
    assert_eq!(plans, vec![INT8, TEXT]);
    assert_eq!(
        mapping.key,
        Some(vec![KeyField {
            field: 0,
            column: 1
        }])
    );
    assert_eq!(mapping.key_coverage, KeyCoverage::Covered);
    assert!(mapping.warnings().is_empty());
    assert_eq!(mapping.source.to_string(), "public.users");
}

#[test]
fn postgres_column_names_match_unquoted_fields_in_any_case() {
    let rel = relation(
        ReplicaIdentity::Default,
        &[("ID", INT8, true), ("Name", TEXT, false)],
    );
    let mapping = plan_mapping(&rel, &users_table(), &PgTypes::new(), STRICT).unwrap();
    assert_eq!(columns_of(&mapping), vec![Some(0), Some(1)]);
    // What is sent is spelled from the schema, not from PostgreSQL.
    assert_eq!(mapping.fields[1].json_key, "\"name\"");
}

#[test]
fn quoted_fields_match_only_the_exact_postgres_name() {
    let t = table(
        vec![
            field(Name::unquoted("id"), SqlType::BigInt, false),
            field(Name::quoted("Name"), SqlType::Varchar, true),
        ],
        Some(&["id"]),
    );
    let rel = relation(
        ReplicaIdentity::Default,
        &[("id", INT8, true), ("name", TEXT, false)],
    );
    let mapping = plan_mapping(&rel, &t, &PgTypes::new(), STRICT).unwrap();
    assert_eq!(columns_of(&mapping), vec![Some(0), None]);
    assert_eq!(mapping.absent_nullable, vec![Name::quoted("Name")]);
    assert_eq!(mapping.skipped_columns, vec!["name".to_owned()]);
}

#[test]
fn exact_matches_are_claimed_before_case_insensitive_ones() {
    let t = table(
        vec![
            field(Name::unquoted("id"), SqlType::BigInt, false),
            field(Name::quoted("ID"), SqlType::BigInt, true),
        ],
        Some(&["id"]),
    );
    let rel = relation(
        ReplicaIdentity::Default,
        &[("ID", INT8, false), ("id", INT8, true)],
    );
    let mapping = plan_mapping(&rel, &t, &PgTypes::new(), STRICT).unwrap();
    assert_eq!(columns_of(&mapping), vec![Some(1), Some(0)]);
}

#[test]
fn two_postgres_columns_differing_in_case_are_ambiguous_for_an_unquoted_field() {
    let rel = relation(
        ReplicaIdentity::Default,
        &[
            ("id", INT8, true),
            ("Name", TEXT, false),
            ("NAME", TEXT, false),
        ],
    );
    let err = plan_mapping(&rel, &users_table(), &PgTypes::new(), STRICT).unwrap_err();
    assert_snapshot!(err, @"
    cannot map PostgreSQL table public.users to Feldera table users:
      - Feldera column name matches PostgreSQL columns Name, NAME (names differing only in case); accepted: one match, e.g. a quoted Feldera column name
    ");
}

#[test]
fn extra_postgres_columns_are_skipped_and_reported_once() {
    let rel = relation(
        ReplicaIdentity::Default,
        &[
            ("id", INT8, true),
            ("secret", TEXT, false),
            ("name", TEXT, false),
            ("pw", TEXT, false),
        ],
    );
    let mapping = plan_mapping(&rel, &users_table(), &PgTypes::new(), STRICT).unwrap();
    assert_eq!(
        mapping.skipped_columns,
        vec!["secret".to_owned(), "pw".to_owned()]
    );
    assert_eq!(
        mapping.warnings(),
        vec!["public.users -> users: PostgreSQL column(s) secret, pw have no Feldera column and are not sent".to_owned()]
    );
}

#[test]
fn nullable_feldera_columns_missing_in_postgres_are_allowed_and_recorded() {
    let rel = relation(ReplicaIdentity::Default, &[("id", INT8, true)]);
    let mapping = plan_mapping(&rel, &users_table(), &PgTypes::new(), STRICT).unwrap();
    assert_eq!(columns_of(&mapping), vec![Some(0), None]);
    assert_eq!(mapping.absent_nullable, vec![Name::unquoted("name")]);
    assert_snapshot!(mapping.warnings().join("\n"), @"public.users -> users: Feldera column(s) name have no PostgreSQL column and stay NULL");
}

#[test]
fn not_null_feldera_columns_missing_in_postgres_are_refused_all_at_once() {
    let t = table(
        vec![
            field(Name::unquoted("id"), SqlType::BigInt, false),
            field(Name::unquoted("email"), SqlType::Varchar, false),
        ],
        None,
    );
    let rel = relation(ReplicaIdentity::Default, &[("name", TEXT, false)]);
    let err = plan_mapping(&rel, &t, &PgTypes::new(), STRICT).unwrap_err();
    assert_snapshot!(err, @"
    cannot map PostgreSQL table public.users to Feldera table users:
      - Feldera column id (BIGINT NOT NULL) has no PostgreSQL column and no DEFAULT; accepted: a PostgreSQL column of that name, a DEFAULT on the Feldera column, or a nullable Feldera column
      - Feldera column email (VARCHAR NOT NULL) has no PostgreSQL column and no DEFAULT; accepted: a PostgreSQL column of that name, a DEFAULT on the Feldera column, or a nullable Feldera column
      - the Feldera table has no PRIMARY KEY, so replayed changes would be counted twice; accepted: a PRIMARY KEY in the Feldera program, or FELDERA_REQUIRE_PRIMARY_KEY=false
    ");
}

#[test]
fn a_key_column_missing_in_postgres_is_refused_even_when_nullable() {
    let t = table(
        vec![field(Name::unquoted("id"), SqlType::BigInt, true)],
        Some(&["id"]),
    );
    let rel = relation(ReplicaIdentity::Default, &[("other", INT8, true)]);
    let err = plan_mapping(&rel, &t, &PgTypes::new(), STRICT).unwrap_err();
    assert_eq!(
        err.problems,
        vec![MappingProblem::MissingKey {
            field: Name::unquoted("id")
        }]
    );
}

#[test]
fn type_pairs_are_checked_and_refusals_name_table_column_and_field() {
    let ok = relation(
        ReplicaIdentity::Default,
        &[("id", INT8, true), ("name", TEXT, false)],
    );
    assert!(plan_mapping(&ok, &users_table(), &PgTypes::new(), STRICT).is_ok());

    let t = table(
        vec![
            field(Name::unquoted("id"), SqlType::BigInt, false),
            field(Name::unquoted("flag"), SqlType::Boolean, true),
        ],
        Some(&["id"]),
    );
    let bad = relation(
        ReplicaIdentity::Default,
        &[("id", BOOL, true), ("flag", INT4, false)],
    );
    let err = plan_mapping(&bad, &t, &PgTypes::new(), STRICT).unwrap_err();
    let refused: Vec<(String, String)> = err
        .problems
        .iter()
        .filter_map(|p| match p {
            MappingProblem::Unsupported { field, column, .. } => {
                Some((field.to_string(), column.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        refused,
        vec![("id".into(), "id".into()), ("flag".into(), "flag".into())]
    );
    let text = err.to_string();
    assert!(text.starts_with("cannot map PostgreSQL table public.users to Feldera table users:\n  - column id -> id: "), "{text}");
}

#[test]
fn tables_without_primary_key_are_refused_unless_allowed() {
    let t = table(
        vec![field(Name::unquoted("id"), SqlType::BigInt, false)],
        None,
    );
    let rel = relation(ReplicaIdentity::Full, &[("id", INT8, true)]);
    let err = plan_mapping(&rel, &t, &PgTypes::new(), STRICT).unwrap_err();
    assert_eq!(err.problems, vec![MappingProblem::NoPrimaryKey]);
    let lax = MappingOptions {
        require_primary_key: false,
    };
    let mapping = plan_mapping(&rel, &t, &PgTypes::new(), lax).unwrap();
    assert_eq!(mapping.key, None);
    assert_eq!(mapping.key_coverage, KeyCoverage::Covered);
}

#[test]
fn keyless_tables_need_replica_identity_full() {
    let t = table(
        vec![field(Name::unquoted("id"), SqlType::BigInt, false)],
        None,
    );
    let rel = relation(ReplicaIdentity::Default, &[("id", INT8, true)]);
    let lax = MappingOptions {
        require_primary_key: false,
    };
    let mapping = plan_mapping(&rel, &t, &PgTypes::new(), lax).unwrap();
    assert_eq!(
        mapping.key_coverage,
        KeyCoverage::NeedsFullRow {
            identity: ReplicaIdentity::Default
        }
    );
    assert_snapshot!(mapping.key_coverage, @"the Feldera table has no primary key, so deletes must carry the whole row, but REPLICA IDENTITY is DEFAULT; set REPLICA IDENTITY FULL or give the Feldera table a key");
}

#[test]
fn key_coverage_reports_feldera_key_columns_outside_the_replica_identity() {
    let t = table(
        vec![
            field(Name::unquoted("tenant"), SqlType::BigInt, false),
            field(Name::unquoted("id"), SqlType::BigInt, false),
        ],
        Some(&["tenant", "id"]),
    );
    let rel = relation(
        ReplicaIdentity::Index,
        &[("id", INT8, true), ("tenant", INT8, false)],
    );
    let mapping = plan_mapping(&rel, &t, &PgTypes::new(), STRICT).unwrap();
    assert_eq!(
        mapping.key,
        Some(vec![
            KeyField {
                field: 0,
                column: 1
            },
            KeyField {
                field: 1,
                column: 0
            }
        ])
    );
    assert_snapshot!(mapping.key_coverage, @"Feldera key column(s) tenant are not in the replica identity (USING INDEX), so deletes and key changes cannot name the Feldera row; make the PostgreSQL key match or set REPLICA IDENTITY FULL");
}

#[test]
fn a_wider_replica_identity_covers_a_narrower_feldera_key() {
    let rel = relation(
        ReplicaIdentity::Default,
        &[("id", INT8, true), ("name", TEXT, true)],
    );
    let mapping = plan_mapping(&rel, &users_table(), &PgTypes::new(), STRICT).unwrap();
    assert!(mapping.key_coverage.is_covered());
}

#[test]
fn identity_full_covers_and_nothing_never_does() {
    let full = relation(
        ReplicaIdentity::Full,
        &[("id", INT8, true), ("name", TEXT, true)],
    );
    assert!(plan_mapping(&full, &users_table(), &PgTypes::new(), STRICT)
        .unwrap()
        .key_coverage
        .is_covered());
    let nothing = relation(
        ReplicaIdentity::Nothing,
        &[("id", INT8, false), ("name", TEXT, false)],
    );
    let mapping = plan_mapping(&nothing, &users_table(), &PgTypes::new(), STRICT).unwrap();
    assert_eq!(mapping.key_coverage, KeyCoverage::IdentityNothing);
    assert_eq!(mapping.warnings().len(), 1);
}

#[test]
fn a_postgres_table_without_key_under_default_identity_misses_every_key_column() {
    let rel = relation(
        ReplicaIdentity::Default,
        &[("id", INT8, false), ("name", TEXT, false)],
    );
    let mapping = plan_mapping(&rel, &users_table(), &PgTypes::new(), STRICT).unwrap();
    assert_eq!(
        mapping.key_coverage,
        KeyCoverage::Missing {
            identity: ReplicaIdentity::Default,
            missing: vec![Name::unquoted("id")]
        }
    );
}

fn with_default(mut f: Field, default: &str) -> Field {
    f.default = Some(default.to_owned());
    f
}

#[test]
fn feldera_columns_with_a_default_need_no_postgres_column_and_take_the_default() {
    let t = table(
        vec![
            field(Name::unquoted("id"), SqlType::BigInt, false),
            with_default(field(Name::unquoted("score"), SqlType::Integer, false), "0"),
            with_default(
                field(Name::unquoted("tag"), SqlType::Varchar, true),
                "'none'",
            ),
            field(Name::unquoted("note"), SqlType::Varchar, true),
        ],
        Some(&["id"]),
    );
    let rel = relation(ReplicaIdentity::Default, &[("id", INT8, true)]);
    let mapping = plan_mapping(&rel, &t, &PgTypes::new(), STRICT).unwrap();
    assert_eq!(columns_of(&mapping), vec![Some(0), None, None, None]);
    assert_snapshot!(mapping.warnings().join("\n"), @"
    public.users -> users: Feldera column(s) score (DEFAULT 0), tag (DEFAULT 'none') have no PostgreSQL column and take their DEFAULT
    public.users -> users: Feldera column(s) note have no PostgreSQL column and stay NULL
    ");
}

#[test]
fn a_not_null_column_without_default_names_the_default_as_a_remedy() {
    let t = table(
        vec![
            field(Name::unquoted("id"), SqlType::BigInt, false),
            field(Name::unquoted("score"), SqlType::Integer, false),
        ],
        Some(&["id"]),
    );
    let rel = relation(ReplicaIdentity::Default, &[("id", INT8, true)]);
    let err = plan_mapping(&rel, &t, &PgTypes::new(), STRICT).unwrap_err();
    assert_snapshot!(err, @"
    cannot map PostgreSQL table public.users to Feldera table users:
      - Feldera column score (INTEGER NOT NULL) has no PostgreSQL column and no DEFAULT; accepted: a PostgreSQL column of that name, a DEFAULT on the Feldera column, or a nullable Feldera column
    ");
}

fn typed_relation(columns: &[(&str, u32, i32)]) -> Relation {
    let mut rel = relation(
        ReplicaIdentity::Default,
        &columns
            .iter()
            .map(|(n, t, _)| (*n, *t, *n == "id"))
            .collect::<Vec<_>>(),
    );
    for (col, (_, _, typmod)) in rel.columns.iter_mut().zip(columns) {
        col.type_modifier = *typmod;
    }
    rel
}

#[test]
fn declared_lengths_postgres_may_exceed_are_warned_once_per_column() {
    let varchar = |n| ColumnType::new(SqlType::Varchar, true).with_precision(n);
    let t = table(
        vec![
            field(Name::unquoted("id"), SqlType::BigInt, false),
            Field::new(Name::unquoted("short"), varchar(10)),
            Field::new(Name::unquoted("fits"), varchar(10)),
            Field::new(Name::unquoted("free"), varchar(-1)),
            Field::new(
                Name::unquoted("code"),
                ColumnType::new(SqlType::Char, true).with_precision(2),
            ),
            Field::new(
                Name::unquoted("blob"),
                ColumnType::new(SqlType::Varbinary, true).with_precision(16),
            ),
            Field::new(
                Name::unquoted("tags"),
                ColumnType::array_of(varchar(3), true),
            ),
        ],
        Some(&["id"]),
    );
    let rel = typed_relation(&[
        ("id", INT8, -1),
        ("short", TEXT, -1),
        ("fits", oid::VARCHAR, 8 + 4),
        ("free", TEXT, -1),
        ("code", oid::BPCHAR, 3 + 4),
        ("blob", oid::BYTEA, -1),
        ("tags", 1015, 3 + 4),
    ]);
    let mapping = plan_mapping(&rel, &t, &PgTypes::new(), STRICT).unwrap();
    assert_snapshot!(mapping.warnings().join("\n"), @"
    public.users -> users: Feldera column short is VARCHAR(10) but PostgreSQL column short (text) may hold longer values; Feldera does not enforce declared lengths on input, so longer values are sent and stored unchanged
    public.users -> users: Feldera column code is CHAR(2) but PostgreSQL column code (bpchar) may hold longer values; Feldera does not enforce declared lengths on input, so longer values are sent and stored unchanged
    public.users -> users: Feldera column blob is VARBINARY(16) but PostgreSQL column blob (bytea) may hold longer values; Feldera does not enforce declared lengths on input, so longer values are sent and stored unchanged
    ");
}

#[test]
fn a_nullable_variant_fed_from_jsonb_warns_that_json_null_becomes_sql_null() {
    let t = table(
        vec![
            field(Name::unquoted("id"), SqlType::BigInt, false),
            field(Name::unquoted("doc"), SqlType::Variant, true),
            field(Name::unquoted("strict"), SqlType::Variant, false),
        ],
        Some(&["id"]),
    );
    let rel = typed_relation(&[
        ("id", INT8, -1),
        ("doc", oid::JSONB, -1),
        ("strict", oid::JSON, -1),
    ]);
    let mapping = plan_mapping(&rel, &t, &PgTypes::new(), STRICT).unwrap();
    assert_eq!(mapping.cautions.len(), 1);
    assert_snapshot!(mapping.warnings().join("\n"), @"public.users -> users: Feldera column doc is a nullable VARIANT: a value of PostgreSQL column doc that is the JSON document null arrives as SQL NULL (Feldera reads null in a nullable column as NULL and has no other spelling for a VARIANT null); declare the column VARIANT NOT NULL to keep it a VARIANT null (PostgreSQL NULLs are then refused)");
}

#[test]
fn narrower_feldera_numbers_are_warned_with_what_does_not_fit() {
    let decimal = |p, s| {
        let mut t = ColumnType::new(SqlType::Decimal, true).with_precision(p);
        t.scale = Some(s);
        t
    };
    let t = table(
        vec![
            field(Name::unquoted("id"), SqlType::BigInt, false),
            field(Name::unquoted("big"), SqlType::Integer, true),
            field(Name::unquoted("same"), SqlType::Integer, true),
            field(Name::unquoted("wide"), SqlType::BigInt, true),
            field(Name::unquoted("tiny"), SqlType::TinyInt, true),
            field(Name::unquoted("ref"), SqlType::Integer, true),
            Field::new(Name::unquoted("price"), decimal(8, 2)),
            Field::new(Name::unquoted("cents"), decimal(8, 2)),
            Field::new(Name::unquoted("amount"), decimal(28, 10)),
            Field::new(
                Name::unquoted("counts"),
                ColumnType::array_of(ColumnType::new(SqlType::Integer, true), true),
            ),
        ],
        Some(&["id"]),
    );
    // numeric(p, s)'s modifier is ((p << 16) | s) + 4.
    let numeric = |p: i32, s: i32| ((p << 16) | s) + 4;
    let rel = typed_relation(&[
        ("id", INT8, -1),
        ("big", INT8, -1),
        ("same", oid::INT4, -1),
        ("wide", oid::INT4, -1),
        ("tiny", oid::INT2, -1),
        ("ref", oid::OID, -1),
        ("price", oid::NUMERIC, numeric(10, 2)),
        ("cents", oid::NUMERIC, numeric(6, 2)),
        ("amount", oid::NUMERIC, -1),
        ("counts", 1016, -1),
    ]);
    let mapping = plan_mapping(&rel, &t, &PgTypes::new(), STRICT).unwrap();
    let narrowed: Vec<String> = mapping
        .cautions
        .iter()
        .filter_map(|c| match c {
            FieldCaution::Narrowing { field, .. } => Some(field.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        narrowed,
        ["big", "tiny", "ref", "price", "amount", "counts"]
    );
    assert_snapshot!(mapping.warnings().join("\n"), @r#"
    public.users -> users: Feldera column big is INTEGER, narrower than PostgreSQL column big (int8): it holds integers outside INTEGER's 32-bit range; such a value stops the stream (exit 1) and the slot waits before its transaction until the Feldera column is widened (docs/guide/types.md, "When a value does not fit")
    public.users -> users: Feldera column tiny is TINYINT, narrower than PostgreSQL column tiny (int2): it holds integers outside TINYINT's 8-bit range; such a value stops the stream (exit 1) and the slot waits before its transaction until the Feldera column is widened (docs/guide/types.md, "When a value does not fit")
    public.users -> users: Feldera column ref is INTEGER, narrower than PostgreSQL column ref (oid): it holds integers outside INTEGER's 32-bit range; such a value stops the stream (exit 1) and the slot waits before its transaction until the Feldera column is widened (docs/guide/types.md, "When a value does not fit")
    public.users -> users: Feldera column price is DECIMAL(8, 2), narrower than PostgreSQL column price (numeric): numeric(10, 2) holds up to 8 integer and 2 fraction digits, DECIMAL(8, 2) 6 and 2; such a value stops the stream (exit 1) and the slot waits before its transaction until the Feldera column is widened (docs/guide/types.md, "When a value does not fit")
    public.users -> users: Feldera column amount is DECIMAL(28, 10), narrower than PostgreSQL column amount (numeric): numeric without a declared precision holds more than DECIMAL(28, 10)'s 18 integer and 10 fraction digits; such a value stops the stream (exit 1) and the slot waits before its transaction until the Feldera column is widened (docs/guide/types.md, "When a value does not fit")
    public.users -> users: Feldera column counts is INTEGER ARRAY, narrower than PostgreSQL column counts (_int8): it holds integers outside INTEGER's 32-bit range; such a value stops the stream (exit 1) and the slot waits before its transaction until the Feldera column is widened (docs/guide/types.md, "When a value does not fit")
    "#);
}

/// `short` = varchar(5) as a domain (its modifier is the domain's: a column of a domain
/// has -1), `short[]` its array, `shortlist` a domain over varchar(2)[], `doc` a domain
/// over jsonb, `mood` an enum.
fn domain_types() -> PgTypes {
    use crate::value::types::{TypeInfo, TypeKind};
    let mut types = PgTypes::new();
    let mut add = |oid, name: &str, kind| {
        types.insert(
            oid,
            TypeInfo {
                name: name.into(),
                kind,
            },
        )
    };
    add(
        90_003,
        "short",
        TypeKind::Domain {
            base: oid::VARCHAR,
            type_modifier: 5 + 4,
        },
    );
    add(
        90_030,
        "short[]",
        TypeKind::Array {
            element: 90_003,
            delimiter: b',',
        },
    );
    add(
        90_031,
        "doc",
        TypeKind::Domain {
            base: oid::JSONB,
            type_modifier: -1,
        },
    );
    add(90_006, "mood", TypeKind::Opaque { what: "enum" });
    add(
        90_032,
        "shortlist",
        TypeKind::Domain {
            base: 1015,
            type_modifier: 2 + 4,
        },
    );
    types
}

#[test]
fn a_domain_column_earns_the_cautions_of_its_base_type_and_modifier() {
    let varchar = |n| ColumnType::new(SqlType::Varchar, true).with_precision(n);
    let t = table(
        vec![
            field(Name::unquoted("id"), SqlType::BigInt, false),
            Field::new(Name::unquoted("fits"), varchar(5)),
            Field::new(Name::unquoted("cut"), varchar(3)),
            Field::new(
                Name::unquoted("cuts"),
                ColumnType::array_of(varchar(3), true),
            ),
            Field::new(
                Name::unquoted("list"),
                ColumnType::array_of(varchar(3), true),
            ),
            field(Name::unquoted("doc"), SqlType::Variant, true),
        ],
        Some(&["id"]),
    );
    let rel = typed_relation(&[
        ("id", INT8, -1),
        ("fits", 90_003, -1),
        ("cut", 90_003, -1),
        ("cuts", 90_030, -1),
        ("list", 90_032, -1),
        ("doc", 90_031, -1),
    ]);
    let mapping = plan_mapping(&rel, &t, &domain_types(), STRICT).unwrap();
    assert_snapshot!(mapping.warnings().join("\n"), @r"
    public.users -> users: Feldera column cut is VARCHAR(3) but PostgreSQL column cut (short (domain over varchar)) may hold longer values; Feldera does not enforce declared lengths on input, so longer values are sent and stored unchanged
    public.users -> users: Feldera column cuts is VARCHAR(3) ARRAY but PostgreSQL column cuts (short[]) may hold longer values; Feldera does not enforce declared lengths on input, so longer values are sent and stored unchanged
    public.users -> users: Feldera column doc is a nullable VARIANT: a value of PostgreSQL column doc that is the JSON document null arrives as SQL NULL (Feldera reads null in a nullable column as NULL and has no other spelling for a VARIANT null); declare the column VARIANT NOT NULL to keep it a VARIANT null (PostgreSQL NULLs are then refused)
    ");
}

#[test]
fn a_type_without_a_typed_mapping_is_refused_naming_table_column_type_and_the_way_out() {
    let t = table(
        vec![
            field(Name::unquoted("id"), SqlType::BigInt, false),
            field(Name::unquoted("mood"), SqlType::Integer, true),
        ],
        Some(&["id"]),
    );
    let rel = typed_relation(&[("id", INT8, -1), ("mood", 90_006, -1)]);
    let err = plan_mapping(&rel, &t, &domain_types(), STRICT).unwrap_err();
    assert_snapshot!(err, @r"
    cannot map PostgreSQL table public.users to Feldera table users:
      - column mood -> mood: PostgreSQL type mood (enum) cannot be sent to a Feldera INTEGER column: slotline has no conversion for this pair; mood (enum) is accepted by VARCHAR only (the text PostgreSQL prints); for another Feldera type, declare the Feldera column VARCHAR and convert it in a Feldera view (CAST), or change the PostgreSQL column to a type slotline maps to it
    ");
}
