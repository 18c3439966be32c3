//! Composite values: record text into JSON objects keyed by the ROW's member names, nested
//! composites and arrays of them, hostile record texts, member mismatches refused at plan
//! time, and properties against a `record_out`/`array_out` written from PostgreSQL's rules.

use super::*;
use crate::schema::{Field, Name, SqlType};
use crate::value::fuzz::{catalog, oids};
use crate::value::types::{Member, TypeInfo, TypeKind};
use proptest::prelude::*;

fn member(name: &str, columntype: ColumnType) -> Field {
    Field::new(Name::unquoted(name), columntype)
}

fn row_of(fields: Vec<Field>, nullable: bool) -> ColumnType {
    ColumnType {
        fields,
        ..ColumnType::new(SqlType::Struct, nullable)
    }
}

/// `ROW(street VARCHAR, zip INTEGER)`, every member nullable.
fn addr_row() -> ColumnType {
    row_of(
        vec![
            member("street", col(SqlType::Varchar)),
            member("zip", col(SqlType::Integer)),
        ],
        true,
    )
}

/// `ROW(name VARCHAR, home ROW(...), tags VARCHAR ARRAY, mood VARCHAR)`.
fn person_row() -> ColumnType {
    row_of(
        vec![
            member("name", col(SqlType::Varchar)),
            member("home", addr_row()),
            member("tags", array(col(SqlType::Varchar))),
            member("mood", col(SqlType::Varchar)),
        ],
        true,
    )
}

#[test]
fn composites_become_objects_keyed_by_the_row_members() {
    let types = catalog();
    check_in(
        &types,
        vec![
            ok(
                oids::ADDR,
                addr_row(),
                "(Main,12345)",
                r#"{"street":"Main","zip":12345}"#,
            ),
            ok(
                oids::ADDR,
                addr_row(),
                r#"("Main ""St"", 1\\2",12345)"#,
                r#"{"street":"Main \"St\", 1\\2","zip":12345}"#,
            ),
            ok(
                oids::ADDR,
                addr_row(),
                "(,)",
                r#"{"street":null,"zip":null}"#,
            ),
            ok(
                oids::ADDR,
                addr_row(),
                r#"("",0)"#,
                r#"{"street":"","zip":0}"#,
            ),
            ok(
                oids::ADDR,
                addr_row(),
                r#"("ünï ☃ (x)",-1)"#,
                r#"{"street":"ünï ☃ (x)","zip":-1}"#,
            ),
            ok(
                oids::ADDR,
                addr_row(),
                r#"("tab	and
newline",1)"#,
                r#"{"street":"tab\tand\nnewline","zip":1}"#,
            ),
            // record_in also takes backslash escapes and quotes in the middle of a member.
            ok(
                oids::ADDR,
                addr_row(),
                r#"(a\,b"c,d"e,2)"#,
                r#"{"street":"a,bc,de","zip":2}"#,
            ),
            ok(
                oids::ADDR,
                addr_row(),
                "  ( a b ,3)  ",
                r#"{"street":" a b ","zip":3}"#,
            ),
            ok(
                oids::ADDR,
                addr_row(),
                "(NULL,4)",
                r#"{"street":"NULL","zip":4}"#,
            ),
            ok(
                oids::ADDR_DOMAIN,
                addr_row(),
                "(x,5)",
                r#"{"street":"x","zip":5}"#,
            ),
            ok(
                oids::PERSON,
                person_row(),
                r#"(x,"(""y,z"",3)","{a,""b c"",NULL}",happy)"#,
                r#"{"name":"x","home":{"street":"y,z","zip":3},"tags":["a","b c",null],"mood":"happy"}"#,
            ),
            ok(
                oids::PERSON,
                person_row(),
                "(x,,,)",
                r#"{"name":"x","home":null,"tags":null,"mood":null}"#,
            ),
            ok(
                oids::ADDR_ARRAY,
                array(addr_row()),
                r#"{"(\"a b\",1)",NULL,"(,)","(\"\",2)"}"#,
                r#"[{"street":"a b","zip":1},null,{"street":null,"zip":null},{"street":"","zip":2}]"#,
            ),
            ok(oids::ADDR_ARRAY, array(addr_row()), "{}", "[]"),
            ok(
                oids::ADDR_ARRAY,
                array(array(addr_row())),
                r#"{{"(a,1)"},{"(b,2)"}}"#,
                r#"[[{"street":"a","zip":1}],[{"street":"b","zip":2}]]"#,
            ),
            ok(
                oids::PERSON_ARRAY,
                array(person_row()),
                r#"{"(x,\"(\"\"y,z\"\",3)\",\"{a,\"\"b c\"\"}\",ok)"}"#,
                r#"[{"name":"x","home":{"street":"y,z","zip":3},"tags":["a","b c"],"mood":"ok"}]"#,
            ),
            ok(
                oids::ADDR,
                col(SqlType::Varchar),
                r#"("a b",1)"#,
                r#""(\"a b\",1)""#,
            ),
        ],
    );
}

#[test]
fn hostile_record_texts_are_refused_with_what_was_expected() {
    let types = catalog();
    let strict = row_of(
        vec![
            member("street", not_null(SqlType::Varchar)),
            member("zip", col(SqlType::Integer)),
        ],
        true,
    );
    check_in(
        &types,
        vec![
            err(
                oids::ADDR,
                addr_row(),
                "",
                "expected `(` starting the record",
            ),
            err(
                oids::ADDR,
                addr_row(),
                "Main,1",
                "expected `(` starting the record",
            ),
            err(
                oids::ADDR,
                addr_row(),
                "(",
                "at byte 1: expected `,` or `)`",
            ),
            err(oids::ADDR, addr_row(), "(a", "expected `,` or `)`"),
            err(oids::ADDR, addr_row(), "(a,1", "expected `,` or `)`"),
            err(
                oids::ADDR,
                addr_row(),
                "(a)",
                "fewer members than its composite type",
            ),
            err(
                oids::ADDR,
                addr_row(),
                "(a,1,2)",
                "more members than its composite type",
            ),
            err(
                oids::ADDR,
                addr_row(),
                "(a,1)x",
                "the end of the record after `)`",
            ),
            err(
                oids::ADDR,
                addr_row(),
                "(a,1))",
                "the end of the record after `)`",
            ),
            err(oids::ADDR, addr_row(), r#"("a,1)"#, "a closing `\"`"),
            err(oids::ADDR, addr_row(), r"(a\", "a character after `\\`"),
            err(
                oids::ADDR,
                addr_row(),
                "(a,x)",
                "member zip: malformed value \"x\"",
            ),
            err(
                oids::ADDR,
                addr_row(),
                "(a, 1)",
                "member zip: malformed value \" 1\"",
            ),
            err(
                oids::ADDR,
                addr_row(),
                "(a,99999999999)",
                "member zip: value",
            ),
            err(
                oids::ADDR,
                strict.clone(),
                "(,1)",
                "member street: NULL cannot be sent",
            ),
            err(
                oids::PERSON,
                person_row(),
                r#"(x,"(y)",,)"#,
                "member home: malformed value \"(y)\" at byte 2: expected `,` and another member",
            ),
            err(
                oids::PERSON,
                person_row(),
                r#"(x,,"{a,{b}}",)"#,
                "member tags: malformed",
            ),
            err(
                oids::ADDR_ARRAY,
                array(addr_row()),
                r#"{"(a,1)","(b)"}"#,
                "array element 1: malformed value \"(b)\"",
            ),
        ],
    );
    assert!(decode_in(&types, oids::ADDR, &strict, b"(a\xff,1)")
        .unwrap_err()
        .contains("member street: text is not valid UTF-8"));
}

#[test]
fn a_null_composite_is_null_only_in_a_nullable_row() {
    let types = catalog();
    let nullable = plan(&types, oids::ADDR, &addr_row()).unwrap();
    let mut out = Vec::new();
    nullable.write_datum(None, &mut out).unwrap();
    assert_eq!(out, b"null");
    let strict = plan(&types, oids::ADDR, &row_of(addr_row().fields, false)).unwrap();
    assert_eq!(
        strict.write_datum(None, &mut out).unwrap_err().kind,
        ValueErrorKind::NullNotAllowed
    );
    let mut out = b"{\"a\":".to_vec();
    assert!(strict.write_json(b"(a,1,2)", &mut out).is_err());
    assert_eq!(out, b"{\"a\":", "a refused record leaves nothing behind");
}

#[test]
fn members_match_by_name_in_any_case_and_keep_felderas_spelling() {
    let types = catalog();
    // Feldera writes struct members without `case_sensitive`: their names match in any
    // case, and the key sent is the schema's spelling, which Feldera's reader takes whether
    // the member was quoted or not.
    let upper = row_of(
        vec![
            member("ZIP", col(SqlType::Integer)),
            member("Street", col(SqlType::Varchar)),
        ],
        true,
    );
    assert_eq!(
        decode_in(&types, oids::ADDR, &upper, b"(a,1)"),
        Ok(r#"{"Street":"a","ZIP":1}"#.to_owned())
    );
    let quoted = row_of(
        vec![
            Field::new(Name::quoted("ZIP"), col(SqlType::Integer)),
            member("street", col(SqlType::Varchar)),
        ],
        true,
    );
    let refused = decode_in(&types, oids::ADDR, &quoted, b"(a,1)").unwrap_err();
    assert!(
        refused.contains("member zip has no ROW member of that name"),
        "a case-sensitive name matches only its own spelling: {refused}"
    );
}

#[test]
fn member_mismatches_are_refused_at_plan_time_naming_the_members() {
    let types = catalog();
    let renamed = row_of(
        vec![
            member("street", col(SqlType::Varchar)),
            member("code", col(SqlType::Integer)),
        ],
        true,
    );
    let retyped = row_of(
        vec![
            member("street", col(SqlType::Varchar)),
            member("zip", col(SqlType::Boolean)),
        ],
        true,
    );
    let fewer = row_of(vec![member("street", col(SqlType::Varchar))], true);
    let twice = row_of(
        vec![
            member("street", col(SqlType::Varchar)),
            member("STREET", col(SqlType::Varchar)),
            member("zip", col(SqlType::Integer)),
        ],
        true,
    );
    let refusals: Vec<String> = [
        (oids::ADDR, renamed),
        (oids::ADDR, retyped),
        (oids::ADDR, fewer),
        (oids::ADDR, twice),
        (oids::ADDR, col(SqlType::Integer)),
        (oids::ADDR_ARRAY, array(col(SqlType::Integer))),
        (oid::TEXT, addr_row()),
    ]
    .iter()
    .map(|(pg_type, target)| plan(&types, *pg_type, target).unwrap_err().to_string())
    .collect();
    insta::assert_snapshot!(refusals.join("\n"), @r"
        PostgreSQL type addr (composite) cannot be sent to a Feldera ROW(street VARCHAR, code INTEGER) column: the members do not match (member zip has no ROW member of that name; ROW member code is not a member of addr (composite)); addr (composite) is accepted by a ROW type with the same member names, each member accepting its PostgreSQL member's type, or VARCHAR
        PostgreSQL type addr (composite) cannot be sent to a Feldera ROW(street VARCHAR, zip BOOLEAN) column: the members do not match (member zip: PostgreSQL type int4 cannot be sent to a Feldera BOOLEAN column: slotline has no conversion for this pair; int4 is accepted by TINYINT, SMALLINT, INTEGER or BIGINT (range-checked per value), or VARCHAR); addr (composite) is accepted by a ROW type with the same member names, each member accepting its PostgreSQL member's type, or VARCHAR
        PostgreSQL type addr (composite) cannot be sent to a Feldera ROW(street VARCHAR) column: the members do not match (member zip has no ROW member of that name); addr (composite) is accepted by a ROW type with the same member names, each member accepting its PostgreSQL member's type, or VARCHAR
        PostgreSQL type addr (composite) cannot be sent to a Feldera ROW(street VARCHAR, STREET VARCHAR, zip INTEGER) column: the members do not match (ROW member STREET is not a member of addr (composite)); addr (composite) is accepted by a ROW type with the same member names, each member accepting its PostgreSQL member's type, or VARCHAR
        PostgreSQL type addr (composite) cannot be sent to a Feldera INTEGER column: slotline has no conversion for this pair; addr (composite) is accepted by a ROW type with the same member names, each member accepting its PostgreSQL member's type, or VARCHAR
        PostgreSQL type addr[] cannot be sent to a Feldera INTEGER ARRAY column: its elements cannot be decoded: PostgreSQL type addr (composite) cannot be sent to a Feldera INTEGER column: slotline has no conversion for this pair; addr (composite) is accepted by a ROW type with the same member names, each member accepting its PostgreSQL member's type, or VARCHAR
        PostgreSQL type text cannot be sent to a Feldera ROW(street VARCHAR, zip INTEGER) column: slotline has no conversion for this pair; text is accepted by VARCHAR or CHAR
        ");
}

/// A catalog answer whose composite contains itself (PostgreSQL forbids it): planning stops
/// at the depth limit instead of recursing for ever.
#[test]
fn a_composite_that_contains_itself_is_refused_at_the_depth_limit() {
    let mut types = PgTypes::new();
    types.insert(
        5,
        TypeInfo {
            name: "ouroboros".into(),
            kind: TypeKind::Composite {
                members: vec![Member {
                    name: "me".into(),
                    type_oid: 5,
                    type_modifier: -1,
                }],
            },
        },
    );
    let mut target = col(SqlType::Varchar);
    for _ in 0..40 {
        target = row_of(vec![member("me", target)], true);
    }
    let refused = plan(&types, 5, &target).unwrap_err().to_string();
    assert!(refused.contains("deeper than 32 levels"), "{refused}");
}

/// `record_out` for members given as text: quoted when empty or holding `"`, `\`, `(`,
/// `)`, `,` or whitespace, with `"` and `\` doubled inside (PostgreSQL's rowtypes.c).
fn record_out(members: &[Option<String>]) -> String {
    let parts: Vec<String> = members
        .iter()
        .map(|m| match m {
            None => String::new(),
            Some(v) => {
                let quote = v.is_empty()
                    || v.chars().any(|c| {
                        matches!(c, '"' | '\\' | '(' | ')' | ',' | ' ' | '\t' | '\n' | '\r')
                            || c == '\u{b}'
                            || c == '\u{c}'
                    });
                if quote {
                    format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\"\""))
                } else {
                    v.clone()
                }
            }
        })
        .collect();
    format!("({})", parts.join(","))
}

/// `array_out` for one-dimensional text elements: quoted when empty, `NULL` in any case, or
/// holding `{`, `}`, `,`, `"`, `\` or whitespace, with `"` and `\` backslash-escaped.
fn array_out(elements: &[Option<String>]) -> String {
    let parts: Vec<String> = elements
        .iter()
        .map(|e| match e {
            None => "NULL".to_owned(),
            Some(v) => {
                let quote = v.is_empty()
                    || v.eq_ignore_ascii_case("NULL")
                    || v.chars().any(|c| {
                        matches!(c, '{' | '}' | ',' | '"' | '\\') || c.is_ascii_whitespace()
                    });
                if quote {
                    format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
                } else {
                    v.clone()
                }
            }
        })
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// A catalog with composite 100 of `count` text members `m0..`, and its array 101.
fn text_record(count: usize) -> (PgTypes, ColumnType) {
    let mut types = PgTypes::new();
    let members = (0..count)
        .map(|i| Member {
            name: format!("m{i}"),
            type_oid: oid::TEXT,
            type_modifier: -1,
        })
        .collect();
    types.insert(
        100,
        TypeInfo {
            name: "rec".into(),
            kind: TypeKind::Composite { members },
        },
    );
    types.insert(
        101,
        TypeInfo {
            name: "rec[]".into(),
            kind: TypeKind::Array {
                element: 100,
                delimiter: b',',
            },
        },
    );
    let row = row_of(
        (0..count)
            .map(|i| member(&format!("m{i}"), col(SqlType::Varchar)))
            .collect(),
        true,
    );
    (types, row)
}

fn expected_object(members: &[Option<String>]) -> serde_json::Value {
    serde_json::Value::Object(
        members
            .iter()
            .enumerate()
            .map(|(i, m)| (format!("m{i}"), serde_json::json!(m)))
            .collect(),
    )
}

/// Member texts made of what record and array syntax treat specially, plus unicode.
fn member_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(r#"[a-z"\\(),{} \t\nN_ULé☃]{0,8}"#)
}

proptest! {
    #[test]
    fn record_text_round_trips_every_member(
        members in proptest::collection::vec(member_text(), 1..5),
    ) {
        let (types, row) = text_record(members.len());
        let json = decode_in(&types, 100, &row, record_out(&members).as_bytes()).unwrap();
        let got: serde_json::Value = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(got, expected_object(&members));
    }

    #[test]
    fn arrays_of_records_round_trip_every_element(
        records in proptest::collection::vec(
            proptest::option::of(proptest::collection::vec(member_text(), 2..=2)), 0..4),
    ) {
        let (types, row) = text_record(2);
        let elements: Vec<Option<String>> =
            records.iter().map(|r| r.as_deref().map(record_out)).collect();
        let text = array_out(&elements);
        let json = decode_in(&types, 101, &array(row), text.as_bytes()).unwrap();
        let got: serde_json::Value = serde_json::from_str(&json).unwrap();
        let want: Vec<serde_json::Value> = records
            .iter()
            .map(|r| r.as_deref().map_or(serde_json::Value::Null, expected_object))
            .collect();
        prop_assert_eq!(got, serde_json::Value::Array(want));
    }

    /// Whatever the bytes, a record either decodes into one JSON object or is refused.
    #[test]
    fn arbitrary_record_texts_decode_or_are_refused(
        text in r#"[ (),"\\a1{}]{0,24}"#,
    ) {
        let types = catalog();
        if let Ok(json) = decode_in(&types, oids::PERSON, &person_row(), text.as_bytes()) {
            let value: serde_json::Value = serde_json::from_str(&json).unwrap();
            prop_assert!(value.is_object());
        }
    }
}
