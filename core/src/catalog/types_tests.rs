use super::*;

/// One answer row from a `|`-separated line (empty = NULL), as psql prints the answer.
fn row(line: &str) -> Vec<Option<&str>> {
    line.split('|')
        .map(|c| if c.is_empty() { None } else { Some(c) })
        .collect()
}

fn parse(lines: &[&str]) -> Result<PgTypes, CatalogError> {
    let data: Vec<Vec<Option<&str>>> = lines.iter().map(|l| row(l)).collect();
    let rows: Vec<Row<'_>> = data.iter().map(Vec::as_slice).collect();
    parse_types(&rows)
}

/// The answer PostgreSQL 15 gave for a table with a domain over `numeric(12,2)` and one
/// over it, a domain over `varchar(5)`, arrays of a domain, an enum, inet, int4range and
/// citext, and composites `addr (street text, zip int)` and `person (name text, home addr,
/// tags text[])` (measured; `tests/tests/catalog_real.rs` asks a live server).
const MEASURED: [&str; 20] = [
    "23|integer|b||||-1|||||",
    "25|text|b||||-1|||||",
    "869|inet|b||||-1|||||",
    "1009|text[]|b|25|,||-1|||||",
    "1041|inet[]|b|869|,||-1|||||",
    "3904|int4range|r||||-1|||||",
    "16385|citext|b||||-1|citext||||",
    "16390|citext[]|b|16385|,||-1|||||",
    "16490|money12|d|||1700|786438|||||",
    "16492|money12b|d|||16490|-1|||||",
    "16495|short|d|||1043|9|||||",
    "16496|posint[]|b|16497|,||-1|||||",
    "16497|posint|d|||23|-1|||||",
    "16500|mood|e||||-1|||||",
    "16509|addr|c||||-1|||||",
    "16509||||||||1|street|25|-1",
    "16509||||||||2|zip|23|-1",
    "16512|person|c||||-1|||||",
    "16512||||||||2|home|16509|-1",
    "16512||||||||3|tags|1009|-1",
];

#[test]
fn a_measured_answer_describes_domains_arrays_composites_and_citext() {
    let types = parse(&MEASURED).unwrap();
    let kind = |oid| types.get(oid).map(|t| t.kind.clone());
    assert_eq!(
        kind(16490),
        Some(TypeKind::Domain {
            base: 1700,
            type_modifier: 786_438
        })
    );
    assert_eq!(
        types.resolve(16492, -1).map(|r| (r.oid, r.type_modifier)),
        Some((1700, 786_438)),
        "a domain over a domain reaches numeric(12,2)"
    );
    assert_eq!(
        kind(1041),
        Some(TypeKind::Array {
            element: 869,
            delimiter: b','
        })
    );
    assert_eq!(kind(16385), Some(TypeKind::Text), "citext is text");
    assert_eq!(kind(16500), Some(TypeKind::Opaque { what: "enum" }));
    assert_eq!(kind(3904), Some(TypeKind::Opaque { what: "range" }));
    assert_eq!(kind(869), Some(TypeKind::Opaque { what: "base type" }));
    let Some(TypeKind::Composite { members }) = kind(16509) else {
        panic!("addr is a composite: {:?}", kind(16509));
    };
    let names: Vec<(&str, u32)> = members
        .iter()
        .map(|m| (m.name.as_str(), m.type_oid))
        .collect();
    assert_eq!(names, [("street", 25), ("zip", 23)]);
    let Some(TypeKind::Composite { members }) = kind(16512) else {
        panic!("person is a composite");
    };
    assert_eq!(members.len(), 2, "its first member was dropped");
    assert_eq!(types.name(16509), "addr (composite)");
    assert_eq!(types.name(16497), "posint (domain over int4)");
}

#[test]
fn members_arrive_in_any_order_and_are_kept_in_attribute_order() {
    let types = parse(&[
        "7|pair|c||||-1|||||",
        "7||||||||3|b|25|-1",
        "7||||||||1|a|23|-1",
    ])
    .unwrap();
    let Some(TypeKind::Composite { members }) = types.get(7).map(|t| &t.kind) else {
        panic!("a composite");
    };
    assert_eq!(members[0].name, "a");
    assert_eq!(members[1].name, "b");
}

#[test]
fn a_composite_without_members_is_the_empty_record() {
    let types = parse(&["7|nothing|c||||-1|||||"]).unwrap();
    assert_eq!(
        types.get(7).map(|t| &t.kind),
        Some(&TypeKind::Composite { members: vec![] })
    );
}

#[test]
fn answers_of_another_shape_are_refused_with_the_question_named() {
    let refused = |lines: &[&str], needle: &str| {
        let error = parse(lines).unwrap_err().to_string();
        assert!(
            error.starts_with("unexpected answer to the column types query")
                && error.contains(needle),
            "{lines:?}: {error}"
        );
    };
    refused(&["x|t|b||||-1|||||"], "oid \"x\" is not a number");
    refused(&["1|t|b||||-1|||"], "row has 10 columns, expected 12");
    refused(&["1|t|b||||-1|||||", "1|t|b||||-1|||||"], "described twice");
    refused(&["1|d|d|||||||||"], "base type is NULL");
    refused(&["1|a[]|b|2|||-1|||||"], "delimiter is NULL");
    refused(&["1|a[]|b|2|;;||-1|||||"], "not one ASCII character");
    refused(&["1|t|z||||-1|||||"], "unknown typtype \"z\"");
    refused(
        &["1||||||||1|a|23|-1"],
        "not a composite type of the answer",
    );
    refused(
        &[
            "1|c|c||||-1|||||",
            "1||||||||1|a|23|-1",
            "1||||||||1|b|23|-1",
        ],
        "lists a member twice",
    );
    refused(
        &["1|c|c||||-1|||||", "1||||||||1|a|x|-1"],
        "member type \"x\"",
    );
}

#[test]
fn the_question_starts_from_the_listed_types() {
    let sql = types_query(&[16490, 1041]);
    assert!(sql.contains("'{16490,1041}'::pg_catalog.oid[]"), "{sql}");
    assert!(sql.contains("NOT a.attisdropped"));
}
