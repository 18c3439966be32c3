//! Whole NDJSON lines: a row change slotline converts is read by the record deserializer
//! Feldera's SQL compiler generates for a table (`deserialize_table_record!`, with the
//! column names, case sensitivity and DEFAULT initialisers the compiler would emit), so
//! field naming, omitted columns and VARIANT nulls are checked together.

use feldera_sqllib::{SqlString, Variant};
use feldera_types::deserialize_table_record;
use feldera_types::format::json::JsonFlavor;
use feldera_types::serde_with_context::{DeserializeWithContext, SqlSerdeConfig};
use slotline_core::contract::{plan_mapping, MappingOptions};
use slotline_core::schema::parse_program_schema;
use slotline_core::convert::Converter;
use slotline_core::pgoutput::encode::row;
use slotline_core::pgoutput::{Insert, Relation, RelationColumn, ReplicaIdentity};
use slotline_core::value::oid;

/// The table `CREATE TABLE docs (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(5),
/// score INT NOT NULL DEFAULT 7, doc VARIANT, strict VARIANT NOT NULL, "Mixed" INT)`, as
/// the compiler declares its record.
#[derive(Debug, PartialEq)]
struct Docs {
    id: i64,
    name: Option<SqlString>,
    score: i32,
    doc: Option<Variant>,
    strict: Variant,
    mixed: Option<i32>,
}

deserialize_table_record!(Docs["docs", 6] {
    (id, "id", false, i64, |_| None),
    (name, "name", false, Option<SqlString>, |_| Some(None)),
    (score, "score", false, i32, |_| Some(7)),
    (doc, "doc", false, Option<Variant>, |_| Some(None)),
    (strict, "strict", false, Variant, |_| None),
    (mixed, "Mixed", true, Option<i32>, |_| Some(None))
});

const SCHEMA: &str = r#"{"inputs":[{"name":"docs","case_sensitive":false,"primary_key":["id"],"fields":[
  {"name":"id","case_sensitive":false,"columntype":{"nullable":false,"type":"BIGINT"}},
  {"name":"name","case_sensitive":false,"columntype":{"nullable":true,"precision":5,"type":"VARCHAR"}},
  {"name":"score","case_sensitive":false,"columntype":{"nullable":false,"type":"INTEGER"},"default":"7"},
  {"name":"doc","case_sensitive":false,"columntype":{"nullable":true,"type":"VARIANT"}},
  {"name":"strict","case_sensitive":false,"columntype":{"nullable":false,"type":"VARIANT"}},
  {"name":"Mixed","case_sensitive":true,"columntype":{"nullable":true,"type":"INTEGER"}}]}],"outputs":[]}"#;

/// PostgreSQL's `docs`: no `score`, and `"Mixed"` spelled as in Feldera.
fn relation() -> Relation {
    let column = |name: &str, type_oid: u32| RelationColumn {
        in_replica_identity: name == "id",
        name: name.to_owned(),
        type_oid,
        type_modifier: -1,
    };
    Relation {
        oid: 16384,
        namespace: "public".into(),
        name: "docs".into(),
        replica_identity: ReplicaIdentity::Default,
        columns: vec![
            column("id", oid::INT8),
            column("name", oid::TEXT),
            column("doc", oid::JSONB),
            column("strict", oid::JSONB),
            column("Mixed", oid::INT4),
        ],
    }
}

fn check(values: &[Option<&str>], expected: Docs) -> Result<(), String> {
    let schema = parse_program_schema(SCHEMA.as_bytes()).map_err(|e| e.to_string())?;
    let mapping = plan_mapping(
        &relation(),
        &schema.inputs[0],
        &slotline_core::value::PgTypes::new(),
        MappingOptions::default(),
    )
    .map_err(|e| e.to_string())?;
    let insert = Insert {
        relation_oid: 16384,
        new: row(values),
    };
    let mut line = Vec::new();
    Converter::new(&mapping)
        .insert(&insert, &mut line)
        .map_err(|e| format!("slotline refuses the row: {e}"))?;
    let event: serde_json::Value = serde_json::from_slice(&line).map_err(|e| e.to_string())?;
    let record = event
        .get("insert")
        .ok_or_else(|| format!("not an insert event: {}", String::from_utf8_lossy(&line)))?
        .to_string();
    let config = SqlSerdeConfig::from(JsonFlavor::Default);
    let mut de = serde_json::Deserializer::from_str(&record);
    let got = Docs::deserialize_with_context(&mut de, &config)
        .map_err(|e| format!("Feldera refuses {record}: {e}"))?;
    if got == expected {
        Ok(())
    } else {
        Err(format!(
            "Feldera reads {got:?} from {record}, PostgreSQL holds {expected:?}"
        ))
    }
}

pub fn run() -> Vec<(String, Result<(), String>)> {
    vec![
        (
            "line: names, an omitted DEFAULT column, JSON null documents, a longer VARCHAR".into(),
            check(
                &[
                    Some("1"),
                    Some("longer than five"),
                    Some("null"),
                    Some("null"),
                    Some("5"),
                ],
                Docs {
                    id: 1,
                    name: Some(SqlString::from_ref("longer than five")),
                    score: 7,
                    doc: None,
                    strict: Variant::VariantNull,
                    mixed: Some(5),
                },
            ),
        ),
        (
            "line: NULLs and a nested document".into(),
            check(
                &[
                    Some("-2"),
                    None,
                    Some("{\"a\": [1, null]}"),
                    Some("[]"),
                    None,
                ],
                Docs {
                    id: -2,
                    name: None,
                    score: 7,
                    doc: Some(serde_json::from_str("{\"a\":[1,null]}").expect("JSON")),
                    strict: serde_json::from_str("[]").expect("JSON"),
                    mixed: None,
                },
            ),
        ),
    ]
}
