//! Types the catalog describes: domains as their base type, arrays of enums, network types
//! and ranges as VARCHAR arrays element by element, citext as text, and the refusals of what
//! stays VARCHAR only. The catalog is `fuzz::catalog()` (shaped like a real answer).

use super::*;
use crate::schema::SqlType;
use crate::value::fuzz::{catalog, oids};
use crate::value::types::{TypeInfo, TypeKind};

fn varchars() -> ColumnType {
    array(col(SqlType::Varchar))
}

#[test]
fn domains_decode_as_their_base_type_with_its_checks() {
    use SqlType::{Char, Decimal, Integer, SmallInt, Varchar};
    let types = catalog();
    let money = ColumnType::decimal(12, 2, true);
    check_in(
        &types,
        vec![
            ok(oids::MONEY12, money.clone(), "12.50", r#""12.50""#),
            ok(oids::MONEY12B, money.clone(), "3.00", r#""3.00""#),
            ok(oids::MONEY12, money.clone(), "NaN", "null"),
            err(
                oids::MONEY12,
                ColumnType::decimal(4, 2, true),
                "123.45",
                "out of range",
            ),
            ok(oids::POSINT, col(Integer), "7", "7"),
            err(oids::POSINT, col(SmallInt), "70000", "out of range"),
            ok(oids::SHORT, col(Varchar), "abc", r#""abc""#),
            ok(oids::SHORT, col(Char), "abc", r#""abc""#),
            ok(oids::MONEY12, col(Varchar), "12.50", r#""12.50""#),
            ok(
                oids::POSINT_ARRAY,
                array(col(Integer)),
                "{1,NULL,3}",
                "[1,null,3]",
            ),
            ok(
                oids::POSINT_ARRAY,
                array(array(col(Integer))),
                "{{1,2},{3,4}}",
                "[[1,2],[3,4]]",
            ),
            err(
                oids::MONEY12,
                col(Integer),
                "1",
                "money12 (domain over numeric) is accepted by DECIMAL(p, s) or VARCHAR",
            ),
            ok(oids::MONEY12B, col(Decimal), "-0.50", r#""-0.50""#),
        ],
    );
}

#[test]
fn arrays_of_enums_network_types_and_ranges_are_varchar_arrays_element_by_element() {
    let types = catalog();
    check_in(
        &types,
        vec![
            ok(
                oids::MOOD_ARRAY,
                varchars(),
                "{sad,happy}",
                r#"["sad","happy"]"#,
            ),
            ok(oids::MOOD_ARRAY, varchars(), "{}", "[]"),
            ok(
                oids::MOOD_ARRAY,
                varchars(),
                "{sad,NULL}",
                r#"["sad",null]"#,
            ),
            ok(oids::MOOD_ARRAY, varchars(), r#"{"NULL"}"#, r#"["NULL"]"#),
            ok(
                oids::MOOD_ARRAY,
                array(varchars()),
                "{{sad,ok},{happy,NULL}}",
                r#"[["sad","ok"],["happy",null]]"#,
            ),
            ok(
                oids::INET_ARRAY,
                varchars(),
                "{127.0.0.1,::1,10.0.0.0/8}",
                r#"["127.0.0.1","::1","10.0.0.0/8"]"#,
            ),
            ok(
                oids::INT4RANGE_ARRAY,
                varchars(),
                r#"{"[1,5)",empty,"(,3]"}"#,
                r#"["[1,5)","empty","(,3]"]"#,
            ),
            ok(
                oids::MOOD_ARRAY,
                varchars(),
                r#"{"with \"quote\" and \\ and ,","ünï ☃"}"#,
                r#"["with \"quote\" and \\ and ,","ünï ☃"]"#,
            ),
            ok(
                oids::BOX_ARRAY,
                varchars(),
                "{(3,4),(1,2);(5,6),(0,0)}",
                r#"["(3,4),(1,2)","(5,6),(0,0)"]"#,
            ),
            ok(
                oids::MOOD_ARRAY,
                col(SqlType::Varchar),
                "{sad}",
                r#""{sad}""#,
            ),
            err(oids::MOOD_ARRAY, varchars(), "{sad", "`,` or `}`"),
            err(oids::BOX_ARRAY, varchars(), "{(1,1),(0,0)", "`;` or `}`"),
            err(
                oids::MOOD_ARRAY,
                varchars(),
                "{{sad},{ok}}",
                "array has 2 dimension(s)",
            ),
            err(
                oids::MOOD_ARRAY,
                array(not_null(SqlType::Varchar)),
                "{sad,NULL}",
                "array element 1: NULL cannot be sent",
            ),
        ],
    );
}

#[test]
fn citext_is_text() {
    use SqlType::{Char, Varchar};
    let types = catalog();
    check_in(
        &types,
        vec![
            ok(oids::CITEXT, col(Varchar), "CiT é", r#""CiT é""#),
            ok(oids::CITEXT, col(Char), "x", r#""x""#),
            ok(oids::CITEXT_ARRAY, varchars(), "{A,b}", r#"["A","b"]"#),
            err(
                oids::CITEXT,
                col(SqlType::Integer),
                "1",
                "accepted by VARCHAR or CHAR",
            ),
        ],
    );
}

#[test]
fn types_without_a_typed_mapping_are_refused_with_the_way_out() {
    use SqlType::{BigInt, Integer};
    let types = catalog();
    let refusals: Vec<String> = [
        (oids::MOOD, col(Integer)),
        (oids::MOOD_ARRAY, array(col(Integer))),
        (oids::INET, col(BigInt)),
        (16_384, col(BigInt)),
    ]
    .iter()
    .map(|(pg_type, target)| plan(&types, *pg_type, target).unwrap_err().to_string())
    .collect();
    insta::assert_snapshot!(refusals.join("\n"), @r"
    PostgreSQL type mood (enum) cannot be sent to a Feldera INTEGER column: slotline has no conversion for this pair; mood (enum) is accepted by VARCHAR only (the text PostgreSQL prints); for another Feldera type, declare the Feldera column VARCHAR and convert it in a Feldera view (CAST), or change the PostgreSQL column to a type slotline maps to it
    PostgreSQL type mood[] cannot be sent to a Feldera INTEGER ARRAY column: its elements cannot be decoded: PostgreSQL type mood (enum) cannot be sent to a Feldera INTEGER column: slotline has no conversion for this pair; mood (enum) is accepted by VARCHAR only (the text PostgreSQL prints); for another Feldera type, declare the Feldera column VARCHAR and convert it in a Feldera view (CAST), or change the PostgreSQL column to a type slotline maps to it
    PostgreSQL type inet (base type) cannot be sent to a Feldera BIGINT column: slotline has no conversion for this pair; inet (base type) is accepted by VARCHAR only (the text PostgreSQL prints); for another Feldera type, declare the Feldera column VARCHAR and convert it in a Feldera view (CAST), or change the PostgreSQL column to a type slotline maps to it
    PostgreSQL type oid 16384 cannot be sent to a Feldera BIGINT column: slotline has no conversion for this pair; oid 16384 is accepted by VARCHAR only: the catalog slotline read does not describe it (a type created since? a change naming it reads the catalog once more before it is refused)
    ");
}

#[test]
fn a_domain_cycle_in_a_catalog_answer_plans_only_as_text() {
    let mut types = PgTypes::new();
    let domain = |base| TypeInfo {
        name: "loop".into(),
        kind: TypeKind::Domain {
            base,
            type_modifier: -1,
        },
    };
    types.insert(7, domain(8));
    types.insert(8, domain(7));
    assert_eq!(
        decode_in(&types, 7, &col(SqlType::Varchar), b"x"),
        Ok(r#""x""#.to_owned())
    );
    let refused = decode_in(&types, 7, &col(SqlType::Integer), b"1").unwrap_err();
    assert!(refused.contains("names domains without end"), "{refused}");
}

#[test]
fn value_errors_name_the_domain_and_its_base() {
    let types = catalog();
    let plan = plan(&types, oids::POSINT, &not_null(SqlType::SmallInt)).unwrap();
    let error = plan
        .write_json(b"40000", &mut Vec::new())
        .unwrap_err()
        .in_column("public.t", "p");
    insta::assert_snapshot!(error, @r#"table public.t column p (PostgreSQL posint (domain over int4) -> Feldera SMALLINT NOT NULL): value "40000" is out of range: accepted -32768..=32767"#);
}
