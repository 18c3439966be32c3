use super::*;
use crate::contract::mapping::{plan_mapping, MappingOptions};
use crate::pgoutput::encode::row;
use crate::pgoutput::{OldTuple, Relation, RelationColumn, ReplicaIdentity};
use crate::schema::program::parse_program_schema;
use crate::value::PgTypes;

const SCHEMA: &str = r#"{"inputs":[
 {"name":"users","case_sensitive":false,"primary_key":["id"],"materialized":false,"properties":{},
  "fields":[{"name":"id","case_sensitive":false,"columntype":{"type":"BIGINT","nullable":false}},
            {"name":"name","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":true,"precision":-1}},
            {"name":"bio","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":true,"precision":-1}}]},
 {"name":"events","case_sensitive":false,"materialized":true,"properties":{},
  "fields":[{"name":"kind","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":true,"precision":-1}},
            {"name":"n","case_sensitive":false,"columntype":{"type":"INTEGER","nullable":true}}]}
],"outputs":[]}"#;

fn relation(name: &str, identity: ReplicaIdentity, cols: &[(&str, u32, bool)]) -> Relation {
    Relation {
        oid: 1,
        namespace: "public".into(),
        name: name.into(),
        replica_identity: identity,
        columns: cols
            .iter()
            .map(|(n, t, k)| RelationColumn {
                in_replica_identity: *k,
                name: (*n).into(),
                type_oid: *t,
                type_modifier: -1,
            })
            .collect(),
    }
}

fn users(identity: ReplicaIdentity) -> ColumnMapping {
    let schema = parse_program_schema(SCHEMA.as_bytes()).unwrap();
    let full = identity == ReplicaIdentity::Full;
    let rel = relation(
        "users",
        identity,
        &[("id", 20, true), ("name", 25, full), ("bio", 25, full)],
    );
    plan_mapping(
        &rel,
        &schema.inputs[0],
        &PgTypes::new(),
        MappingOptions::default(),
    )
    .unwrap()
}

fn events() -> ColumnMapping {
    let schema = parse_program_schema(SCHEMA.as_bytes()).unwrap();
    let rel = relation(
        "events",
        ReplicaIdentity::Full,
        &[("kind", 25, true), ("n", 23, true)],
    );
    plan_mapping(
        &rel,
        &schema.inputs[1],
        &PgTypes::new(),
        MappingOptions {
            require_primary_key: false,
        },
    )
    .unwrap()
}

fn text(out: Vec<u8>) -> String {
    String::from_utf8(out).unwrap()
}

fn tuple<'a>(values: &[Option<&'a str>]) -> Tuple<'a> {
    row(values)
}

fn with_hole<'a>(mut t: Tuple<'a>, column: usize) -> Tuple<'a> {
    t.columns[column] = Datum::Unchanged;
    t
}

#[test]
fn insert_writes_every_mapped_field_in_schema_order() {
    let m = users(ReplicaIdentity::Default);
    let mut out = Vec::new();
    let insert = Insert {
        relation_oid: 1,
        new: tuple(&[Some("7"), Some("ann"), None]),
    };
    assert_eq!(Converter::new(&m).insert(&insert, &mut out).unwrap(), 1);
    assert_eq!(
        text(out),
        "{\"insert\":{\"id\":7,\"name\":\"ann\",\"bio\":null}}\n"
    );
}

#[test]
fn update_keeping_the_key_is_an_upsert() {
    let m = users(ReplicaIdentity::Default);
    let mut out = Vec::new();
    let update = Update {
        relation_oid: 1,
        old: None,
        new: tuple(&[Some("7"), Some("bob"), Some("x")]),
    };
    assert_eq!(Converter::new(&m).update(&update, &mut out).unwrap(), 1);
    assert_eq!(
        text(out),
        "{\"insert\":{\"id\":7,\"name\":\"bob\",\"bio\":\"x\"}}\n"
    );
}

#[test]
fn key_change_under_default_identity_retracts_old_key() {
    let m = users(ReplicaIdentity::Default);
    let mut out = Vec::new();
    let old = OldTuple {
        kind: OldKind::Key,
        tuple: tuple(&[Some("1"), None, None]),
    };
    let update = Update {
        relation_oid: 1,
        old: Some(old),
        new: tuple(&[Some("99"), Some("n2"), Some("small")]),
    };
    assert_eq!(Converter::new(&m).update(&update, &mut out).unwrap(), 2);
    assert_eq!(
        text(out),
        "{\"delete\":{\"id\":1}}\n{\"insert\":{\"id\":99,\"name\":\"n2\",\"bio\":\"small\"}}\n"
    );
}

#[test]
fn full_identity_compares_key_columns_to_decide_a_key_change() {
    let m = users(ReplicaIdentity::Full);
    let conv = Converter::new(&m);
    let same_key = Update {
        relation_oid: 1,
        old: Some(OldTuple {
            kind: OldKind::Row,
            tuple: tuple(&[Some("5"), Some("a"), Some("b")]),
        }),
        new: tuple(&[Some("5"), Some("c"), Some("b")]),
    };
    let mut out = Vec::new();
    assert_eq!(
        conv.update(&same_key, &mut out).unwrap(),
        1,
        "FULL sends O on every update; not a key change"
    );
    let changed = Update {
        relation_oid: 1,
        old: Some(OldTuple {
            kind: OldKind::Row,
            tuple: tuple(&[Some("5"), Some("a"), Some("b")]),
        }),
        new: tuple(&[Some("6"), Some("a"), Some("b")]),
    };
    let mut out = Vec::new();
    assert_eq!(conv.update(&changed, &mut out).unwrap(), 2);
    assert!(text(out).starts_with("{\"delete\":{\"id\":5}}\n"));
}

#[test]
fn unchanged_toast_under_full_is_filled_from_the_old_row() {
    let m = users(ReplicaIdentity::Full);
    let old = OldTuple {
        kind: OldKind::Row,
        tuple: tuple(&[Some("5"), Some("a"), Some("big")]),
    };
    let update = Update {
        relation_oid: 1,
        old: Some(old),
        new: with_hole(tuple(&[Some("5"), Some("b"), None]), 2),
    };
    let mut out = Vec::new();
    Converter::new(&m).update(&update, &mut out).unwrap();
    assert_eq!(
        text(out),
        "{\"insert\":{\"id\":5,\"name\":\"b\",\"bio\":\"big\"}}\n"
    );
}

#[test]
fn unchanged_toast_under_default_is_a_partial_update_omitting_the_column() {
    let m = users(ReplicaIdentity::Default);
    let update = Update {
        relation_oid: 1,
        old: None,
        new: with_hole(tuple(&[Some("5"), Some("b"), None]), 2),
    };
    let mut out = Vec::new();
    Converter::new(&m).update(&update, &mut out).unwrap();
    assert_eq!(text(out), "{\"update\":{\"id\":5,\"name\":\"b\"}}\n");
}

#[test]
fn unchanged_toast_with_a_key_change_is_refused_naming_the_column() {
    let m = users(ReplicaIdentity::Default);
    let old = OldTuple {
        kind: OldKind::Key,
        tuple: tuple(&[Some("1"), None, None]),
    };
    let update = Update {
        relation_oid: 1,
        old: Some(old),
        new: with_hole(tuple(&[Some("2"), Some("b"), None]), 2),
    };
    let err = Converter::new(&m)
        .update(&update, &mut Vec::new())
        .unwrap_err();
    insta::assert_snapshot!(err, @"public.users -> users: an UPDATE that changed the key left column bio as an unchanged TOASTed value and there is no old value to fill it (REPLICA IDENTITY FULL sends one); refusing to invent a value");
}

#[test]
fn delete_sends_only_the_key() {
    let m = users(ReplicaIdentity::Default);
    let delete = Delete {
        relation_oid: 1,
        old: OldTuple {
            kind: OldKind::Key,
            tuple: tuple(&[Some("3"), None, None]),
        },
    };
    let mut out = Vec::new();
    Converter::new(&m).delete(&delete, &mut out).unwrap();
    assert_eq!(text(out), "{\"delete\":{\"id\":3}}\n");
}

#[test]
fn retraction_without_feldera_key_is_refused() {
    let m = users(ReplicaIdentity::Default);
    // An identity that does not include `id` leaves it NULL in the K image.
    let delete = Delete {
        relation_oid: 1,
        old: OldTuple {
            kind: OldKind::Key,
            tuple: tuple(&[None, Some("ann"), None]),
        },
    };
    let err = Converter::new(&m)
        .delete(&delete, &mut Vec::new())
        .unwrap_err();
    insta::assert_snapshot!(err, @"public.users -> users: a DELETE does not carry Feldera key column id (its old image has NULL); Feldera would keep the row. Make the replica identity include it (e.g. REPLICA IDENTITY FULL)");
}

#[test]
fn keyless_table_retracts_whole_rows() {
    let m = events();
    let conv = Converter::new(&m);
    let delete = Delete {
        relation_oid: 1,
        old: OldTuple {
            kind: OldKind::Row,
            tuple: tuple(&[Some("click"), Some("3")]),
        },
    };
    let mut out = Vec::new();
    conv.delete(&delete, &mut out).unwrap();
    assert_eq!(text(out), "{\"delete\":{\"kind\":\"click\",\"n\":3}}\n");
    let update = Update {
        relation_oid: 1,
        old: Some(OldTuple {
            kind: OldKind::Row,
            tuple: tuple(&[Some("click"), Some("3")]),
        }),
        new: tuple(&[Some("click"), Some("4")]),
    };
    let mut out = Vec::new();
    assert_eq!(conv.update(&update, &mut out).unwrap(), 2);
    assert_eq!(
        text(out),
        "{\"delete\":{\"kind\":\"click\",\"n\":3}}\n{\"insert\":{\"kind\":\"click\",\"n\":4}}\n"
    );
    let no_old = Update {
        relation_oid: 1,
        old: None,
        new: tuple(&[Some("x"), Some("1")]),
    };
    assert!(conv
        .update(&no_old, &mut Vec::new())
        .unwrap_err()
        .problem
        .contains("REPLICA IDENTITY is not FULL"));
}

#[test]
fn bad_values_name_table_column_and_types() {
    let m = users(ReplicaIdentity::Default);
    let insert = Insert {
        relation_oid: 1,
        new: tuple(&[Some("seven"), Some("ann"), None]),
    };
    let err = Converter::new(&m)
        .insert(&insert, &mut Vec::new())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("public.users")
            && err.contains("id")
            && err.contains("int8")
            && err.contains("BIGINT"),
        "{err}"
    );
    let null_key = Insert {
        relation_oid: 1,
        new: tuple(&[None, Some("ann"), None]),
    };
    let err = Converter::new(&m)
        .insert(&null_key, &mut Vec::new())
        .unwrap_err()
        .to_string();
    assert!(err.contains("NULL") || err.contains("null"), "{err}");
}

#[test]
fn binary_values_are_refused_not_guessed() {
    let m = users(ReplicaIdentity::Default);
    let mut t = tuple(&[Some("1"), Some("a"), None]);
    t.columns[1] = Datum::Binary(b"\x00\x01");
    let err = Converter::new(&m)
        .insert(
            &Insert {
                relation_oid: 1,
                new: t,
            },
            &mut Vec::new(),
        )
        .unwrap_err();
    assert!(err.problem.contains("binary format"), "{err}");
}
