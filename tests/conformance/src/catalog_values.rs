//! Values of the types slotline reads from the catalog (domains, arrays of enums, network
//! types and ranges, composites, citext), as PostgreSQL prints them, encoded by slotline and
//! read back by Feldera. A ROW column is read by a struct deserializer made as Feldera's
//! compiler makes one for a `CREATE TYPE` (`deserialize_table_record!`: member names, their
//! case sensitivity, NULL initialisers), so member naming is checked with the values.

use crate::values::{case, equals, run_cases, Case};
use feldera_sqllib::{SqlDecimal, SqlString};
use feldera_types::deserialize_table_record;
use slotline_core::schema::{ColumnType, Field, Name, SqlType};
use slotline_core::value::types::{Member, TypeKind};
use slotline_core::value::{oid, PgTypes};
use std::str::FromStr;
use std::sync::Arc;

// OIDs as a PostgreSQL 15 server assigned them (any unused OIDs would do).
const MONEY12: u32 = 16490;
const MONEY12B: u32 = 16492;
const POSINT: u32 = 16497;
const POSINT_ARRAY: u32 = 16496;
const MOOD: u32 = 16500;
const MOOD_ARRAY: u32 = 16499;
const CITEXT: u32 = 16385;
const CITEXT_ARRAY: u32 = 16390;
const ADDR: u32 = 16509;
const ADDR_ARRAY: u32 = 16508;
const PERSON: u32 = 16512;
const INET: u32 = 869;
const INET_ARRAY: u32 = 1041;
const INT4RANGE: u32 = 3904;
const INT4RANGE_ARRAY: u32 = 3905;

/// `CREATE TYPE addr AS (street VARCHAR, zip INT)` as the compiler declares it.
#[derive(Debug, PartialEq)]
struct Addr {
    street: Option<SqlString>,
    zip: Option<i32>,
}

deserialize_table_record!(Addr["addr", 2] {
    (street, "street", false, Option<SqlString>, |_| Some(None)),
    (zip, "zip", false, Option<i32>, |_| Some(None))
});

/// `CREATE TYPE person AS (name VARCHAR, home addr, tags VARCHAR ARRAY, m VARCHAR,
/// balance DECIMAL(12, 2))`.
#[derive(Debug, PartialEq)]
struct Person {
    name: Option<SqlString>,
    home: Option<Addr>,
    tags: Option<Arc<Vec<Option<SqlString>>>>,
    m: Option<SqlString>,
    balance: Option<SqlDecimal<12, 2>>,
}

deserialize_table_record!(Person["person", 5] {
    (name, "name", false, Option<SqlString>, |_| Some(None)),
    (home, "home", false, Option<Addr>, |_| Some(None)),
    (tags, "tags", false, Option<Arc<Vec<Option<SqlString>>>>, |_| Some(None)),
    (m, "m", false, Option<SqlString>, |_| Some(None)),
    (balance, "balance", false, Option<SqlDecimal<12, 2>>, |_| Some(None))
});

/// `CREATE TYPE quoted AS (street VARCHAR NOT NULL, "Zip" INT)`: a quoted member is
/// matched exactly, an unquoted one in any case.
#[derive(Debug, PartialEq)]
struct Quoted {
    street: SqlString,
    zip: Option<i32>,
}

deserialize_table_record!(Quoted["quoted", 2] {
    (street, "street", false, SqlString, |_| None),
    (zip, "Zip", true, Option<i32>, |_| Some(None))
});

/// What the catalog answers about those types (`catalog::types`).
fn catalog() -> PgTypes {
    let mut types = PgTypes::new();
    let mut add = |oid: u32, name: &str, kind: TypeKind| types.add(oid, name, kind);
    let (domain, array, member) = (TypeKind::domain, TypeKind::array, Member::new);
    add(MONEY12, "money12", domain(oid::NUMERIC, (12 << 16) + 2 + 4));
    add(MONEY12B, "money12b", domain(MONEY12, -1));
    add(POSINT, "posint", domain(oid::INT4, -1));
    add(POSINT_ARRAY, "posint[]", array(POSINT));
    add(MOOD, "mood", TypeKind::Opaque { what: "enum" });
    add(MOOD_ARRAY, "mood[]", array(MOOD));
    add(CITEXT, "citext", TypeKind::Text);
    add(CITEXT_ARRAY, "citext[]", array(CITEXT));
    add(INET, "inet", TypeKind::Opaque { what: "base type" });
    add(INET_ARRAY, "inet[]", array(INET));
    add(INT4RANGE, "int4range", TypeKind::Opaque { what: "range" });
    add(INT4RANGE_ARRAY, "int4range[]", array(INT4RANGE));
    add(
        ADDR,
        "addr",
        TypeKind::Composite {
            members: vec![member("street", oid::TEXT), member("zip", oid::INT4)],
        },
    );
    add(ADDR_ARRAY, "addr[]", array(ADDR));
    add(
        PERSON,
        "person",
        TypeKind::Composite {
            members: vec![
                member("name", oid::TEXT),
                member("home", ADDR),
                member("tags", 1009),
                member("m", MOOD),
                member("balance", MONEY12),
            ],
        },
    );
    types
}

fn t(sql: SqlType) -> ColumnType {
    ColumnType::new(sql, true)
}

fn array(component: ColumnType) -> ColumnType {
    ColumnType::array_of(component, true)
}

/// A ROW column type as slotline reads it from the schema (members without
/// `case_sensitive`, as the compiler writes them).
fn row(members: Vec<(&str, ColumnType)>) -> ColumnType {
    ColumnType {
        fields: members
            .into_iter()
            .map(|(name, ty)| Field::new(Name::unquoted(name), ty))
            .collect(),
        ..ColumnType::new(SqlType::Struct, true)
    }
}

fn addr_row() -> ColumnType {
    row(vec![
        ("street", t(SqlType::Varchar)),
        ("zip", t(SqlType::Integer)),
    ])
}

fn s(text: &str) -> Option<SqlString> {
    Some(SqlString::from_ref(text))
}

fn strings(items: &[Option<&str>]) -> Option<Arc<Vec<Option<SqlString>>>> {
    Some(Arc::new(items.iter().map(|i| i.and_then(s)).collect()))
}

fn addr(street: Option<&str>, zip: Option<i32>) -> Addr {
    Addr {
        street: street.and_then(s),
        zip,
    }
}

fn cases() -> Vec<Case> {
    use SqlType as S;
    let varchars = || array(t(S::Varchar));
    let money = || ColumnType::decimal(12, 2, true);
    vec![
        case(
            "domain over numeric(12,2)",
            MONEY12,
            Some("12.50"),
            money(),
            equals(SqlDecimal::<12, 2>::from_str("12.50").ok()),
        ),
        case(
            "domain over a domain",
            MONEY12B,
            Some("-999999.99"),
            money(),
            equals(SqlDecimal::<12, 2>::from_str("-999999.99").ok()),
        ),
        case(
            "domain over int4",
            POSINT,
            Some("2147483647"),
            t(S::Integer),
            equals(Some(i32::MAX)),
        ),
        case(
            "array of a domain",
            POSINT_ARRAY,
            Some("{1,NULL,3}"),
            array(t(S::Integer)),
            equals(Some(Arc::new(vec![Some(1i32), None, Some(3)]))),
        ),
        case(
            "enum array with quotes, commas and NULL",
            MOOD_ARRAY,
            Some(r#"{sad,"so \"so\", really",NULL}"#),
            varchars(),
            equals(strings(&[Some("sad"), Some("so \"so\", really"), None])),
        ),
        case(
            "enum array of two dimensions",
            MOOD_ARRAY,
            Some("{{sad,ok},{happy,NULL}}"),
            array(varchars()),
            equals(Some(Arc::new(vec![
                strings(&[Some("sad"), Some("ok")]),
                strings(&[Some("happy"), None]),
            ]))),
        ),
        case(
            "empty enum array",
            MOOD_ARRAY,
            Some("{}"),
            varchars(),
            equals(strings(&[])),
        ),
        case(
            "inet array",
            INET_ARRAY,
            Some("{127.0.0.1,::1,10.0.0.0/8}"),
            varchars(),
            equals(strings(&[
                Some("127.0.0.1"),
                Some("::1"),
                Some("10.0.0.0/8"),
            ])),
        ),
        case(
            "int4range array",
            INT4RANGE_ARRAY,
            Some(r#"{"[1,5)",empty,"(,3)"}"#),
            varchars(),
            equals(strings(&[Some("[1,5)"), Some("empty"), Some("(,3)")])),
        ),
        case(
            "citext",
            CITEXT,
            Some("Ünï \"Cité\""),
            t(S::Varchar),
            equals(s("Ünï \"Cité\"")),
        ),
        case(
            "citext array",
            CITEXT_ARRAY,
            Some(r#"{"","a,b",NULL}"#),
            varchars(),
            equals(strings(&[Some(""), Some("a,b"), None])),
        ),
        case(
            "composite with quotes, a comma and a backslash in a member",
            ADDR,
            Some(r#"("Main ""St"", 1\\2 (back)",12345)"#),
            addr_row(),
            equals(Some(addr(Some("Main \"St\", 1\\2 (back)"), Some(12345)))),
        ),
        case(
            "composite whose members are NULL",
            ADDR,
            Some("(,)"),
            addr_row(),
            equals(Some(addr(None, None))),
        ),
        case(
            "NULL composite",
            ADDR,
            None,
            addr_row(),
            equals(None::<Addr>),
        ),
        case(
            "composite with a composite, an array and a domain inside",
            PERSON,
            Some(
                r#"("ünï ☃","(""a\\\\b,c)"",9)","{"""",NULL,NULL,""x\\""y""}","so ""so""",-0.50)"#,
            ),
            row(vec![
                ("name", t(S::Varchar)),
                ("home", addr_row()),
                ("tags", array(t(S::Varchar))),
                ("m", t(S::Varchar)),
                ("balance", money()),
            ]),
            equals(Some(Person {
                name: s("ünï ☃"),
                home: Some(addr(Some("a\\b,c)"), Some(9))),
                tags: strings(&[Some(""), None, None, Some("x\"y")]),
                m: s("so \"so\""),
                balance: SqlDecimal::<12, 2>::from_str("-0.50").ok(),
            })),
        ),
        case(
            "array of composites",
            ADDR_ARRAY,
            Some(r#"{"(\"a b\",1)",NULL,"(,)","(\"\",2)"}"#),
            array(addr_row()),
            equals(Some(Arc::new(vec![
                Some(addr(Some("a b"), Some(1))),
                None,
                Some(addr(None, None)),
                Some(addr(Some(""), Some(2))),
            ]))),
        ),
        case(
            "composite into a ROW with a quoted member",
            ADDR,
            Some("(x,7)"),
            row(vec![
                ("street", ColumnType::new(S::Varchar, false)),
                ("Zip", t(S::Integer)),
            ]),
            equals(Some(Quoted {
                street: SqlString::from_ref("x"),
                zip: Some(7),
            })),
        ),
    ]
}

pub fn run() -> Vec<(String, Result<(), String>)> {
    run_cases(&catalog(), cases())
}
