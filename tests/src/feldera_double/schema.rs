//! The program schema in Feldera's JSON shape (`{"inputs": [...], "outputs": [...]}`), parsed
//! into relations and column types, and the name-matching rules Feldera applies to it.
//!
//! Owns: schema parsing, column type kinds, matching of table names (ingress path, SQL) and
//! JSON field names. Never holds rows or parses values (see `convert`).

use serde_json::Value as Json;

/// A parsed program schema. `raw` is the JSON exactly as configured, served back by
/// `GET /v0/pipelines/{p}` so clients see Feldera's shape byte for byte.
#[derive(Debug, Clone)]
pub struct Schema {
    pub inputs: Vec<Relation>,
    pub outputs: Vec<Relation>,
    pub raw: Json,
}

/// One table or view.
#[derive(Debug, Clone)]
pub struct Relation {
    pub name: String,
    pub case_sensitive: bool,
    pub fields: Vec<Field>,
    /// Indices into `fields` of the primary key columns, in key order; `None` without a key.
    pub primary_key: Option<Vec<usize>>,
    pub materialized: bool,
}

/// One column (or struct member).
#[derive(Debug, Clone)]
pub struct Field {
    pub name: String,
    pub case_sensitive: bool,
    pub columntype: ColumnType,
    /// SQL text of the column's DEFAULT: what Feldera stores when a row omits the column.
    pub default: Option<String>,
    /// The column carries a LATENESS annotation (`lateness` is a string, not null).
    pub lateness: bool,
}

/// A column type as Feldera describes it.
#[derive(Debug, Clone)]
pub struct ColumnType {
    pub kind: TypeKind,
    pub nullable: bool,
    pub precision: Option<i64>,
    pub scale: Option<i64>,
    /// Element type of an ARRAY.
    pub component: Option<Box<ColumnType>>,
    /// Key and value types of a MAP.
    pub key: Option<Box<ColumnType>>,
    pub value: Option<Box<ColumnType>>,
    /// Members of a struct.
    pub fields: Vec<Field>,
}

/// The type names Feldera uses (`type` field), plus `Struct` for a type with `fields`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeKind {
    Boolean,
    TinyInt,
    SmallInt,
    Integer,
    BigInt,
    Real,
    Double,
    Decimal,
    Char,
    Varchar,
    Binary,
    Varbinary,
    Time,
    Date,
    Timestamp,
    TimestampTz,
    Uuid,
    Variant,
    Array,
    Map,
    Struct,
}

const TYPE_NAMES: &[(&str, TypeKind)] = &[
    ("BOOLEAN", TypeKind::Boolean),
    ("TINYINT", TypeKind::TinyInt),
    ("SMALLINT", TypeKind::SmallInt),
    ("INTEGER", TypeKind::Integer),
    ("BIGINT", TypeKind::BigInt),
    ("REAL", TypeKind::Real),
    ("DOUBLE", TypeKind::Double),
    ("DECIMAL", TypeKind::Decimal),
    ("CHAR", TypeKind::Char),
    ("VARCHAR", TypeKind::Varchar),
    ("BINARY", TypeKind::Binary),
    ("VARBINARY", TypeKind::Varbinary),
    ("TIME", TypeKind::Time),
    ("DATE", TypeKind::Date),
    ("TIMESTAMP", TypeKind::Timestamp),
    ("TIMESTAMP_TZ", TypeKind::TimestampTz),
    ("UUID", TypeKind::Uuid),
    ("VARIANT", TypeKind::Variant),
    ("ARRAY", TypeKind::Array),
    ("MAP", TypeKind::Map),
    ("STRUCT", TypeKind::Struct),
];

impl Schema {
    /// Parses `{"inputs": [...], "outputs": [...]}`. Errors name the offending relation or
    /// field and what was expected.
    pub fn parse(raw: Json) -> Result<Schema, String> {
        let inputs = parse_relations(&raw, "inputs")?;
        let outputs = parse_relations(&raw, "outputs")?;
        Ok(Schema {
            inputs,
            outputs,
            raw,
        })
    }

    /// The input table addressed by an ingress path segment (already percent-decoded):
    /// `"Name"` in double quotes matches exactly; an unquoted name is folded to lowercase, as
    /// Feldera's SQL front end does, and so reaches only case-insensitive tables.
    pub fn input_by_path(&self, segment: &str) -> Option<usize> {
        let ident = Ident::from_path_segment(segment);
        self.inputs.iter().position(|r| r.matches(&ident))
    }
}

/// A table name as written by a client: quoted names keep their case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ident {
    Unquoted(String),
    Quoted(String),
}

impl Ident {
    pub fn from_path_segment(segment: &str) -> Ident {
        match segment
            .strip_prefix('"')
            .and_then(|rest| rest.strip_suffix('"'))
        {
            Some(inner) => Ident::Quoted(inner.to_string()),
            None => Ident::Unquoted(segment.to_string()),
        }
    }

    /// The name after Feldera's case folding.
    pub fn folded(&self) -> String {
        match self {
            Ident::Unquoted(s) => s.to_lowercase(),
            Ident::Quoted(s) => s.clone(),
        }
    }
}

impl Relation {
    /// Whether a client-written name denotes this relation. A case-insensitive relation's
    /// schema name is already lowercase in Feldera; comparing folded forms also tolerates a
    /// hand-written schema that kept the original case.
    pub fn matches(&self, ident: &Ident) -> bool {
        let folded = ident.folded();
        if self.case_sensitive {
            folded == self.name
        } else {
            folded.to_lowercase() == self.name.to_lowercase()
        }
    }

    /// Ad-hoc queries reach a materialized relation, or a table with a primary key none of
    /// whose columns has LATENESS (Feldera materializes such a table implicitly; a key
    /// column with LATENESS keeps it unmaterialized).
    pub fn queryable(&self) -> bool {
        let key_has_lateness = self
            .primary_key
            .as_ref()
            .is_some_and(|key| key.iter().any(|&i| self.fields[i].lateness));
        self.materialized || (self.primary_key.is_some() && !key_has_lateness)
    }
}

impl Field {
    /// JSON field names match case-insensitively for unquoted columns, exactly for quoted.
    pub fn matches_json_key(&self, key: &str) -> bool {
        if self.case_sensitive {
            key == self.name
        } else {
            key.to_lowercase() == self.name.to_lowercase()
        }
    }

    /// Same rule for a column named in SQL.
    pub fn matches_ident(&self, ident: &Ident) -> bool {
        let folded = ident.folded();
        if self.case_sensitive {
            folded == self.name
        } else {
            folded.to_lowercase() == self.name.to_lowercase()
        }
    }
}

fn parse_relations(raw: &Json, key: &str) -> Result<Vec<Relation>, String> {
    let list = raw
        .get(key)
        .and_then(Json::as_array)
        .ok_or_else(|| format!("schema: `{key}` must be an array of relations"))?;
    list.iter().map(parse_relation).collect()
}

fn parse_relation(raw: &Json) -> Result<Relation, String> {
    let name = str_field(raw, "name", "relation")?;
    let fields = parse_fields(raw.get("fields"), &format!("relation `{name}`"))?;
    let primary_key = match raw.get("primary_key") {
        None | Some(Json::Null) => None,
        Some(Json::Array(cols)) => Some(resolve_key(&name, cols, &fields)?),
        Some(_) => {
            return Err(format!(
                "relation `{name}`: `primary_key` must be an array of column names"
            ))
        }
    };
    Ok(Relation {
        case_sensitive: bool_field(raw, "case_sensitive"),
        materialized: bool_field(raw, "materialized"),
        name,
        fields,
        primary_key,
    })
}

fn resolve_key(relation: &str, cols: &[Json], fields: &[Field]) -> Result<Vec<usize>, String> {
    cols.iter()
        .map(|c| {
            let col = c.as_str().ok_or_else(|| {
                format!("relation `{relation}`: primary key entries must be strings")
            })?;
            fields
                .iter()
                .position(|f| f.matches_json_key(col))
                .ok_or_else(|| {
                    format!("relation `{relation}`: primary key column `{col}` is not a field")
                })
        })
        .collect()
}

fn parse_fields(raw: Option<&Json>, owner: &str) -> Result<Vec<Field>, String> {
    let list = raw
        .and_then(Json::as_array)
        .ok_or_else(|| format!("{owner}: `fields` must be an array"))?;
    list.iter()
        .map(|f| {
            let name = str_field(f, "name", owner)?;
            let at = format!("{owner}, field `{name}`");
            // Columns carry `columntype`; struct members are written inline by the compiler
            // (type keys beside `name`), a member struct as `fields: {fields, nullable}`.
            let columntype = match (f.get("columntype"), f.get("fields")) {
                (Some(ct), _) => parse_type(ct, &at)?,
                (None, Some(inner @ Json::Object(_))) => parse_type(inner, &at)?,
                (None, _) => parse_type(f, &at)?,
            };
            Ok(Field {
                case_sensitive: bool_field(f, "case_sensitive"),
                columntype,
                default: f.get("default").and_then(Json::as_str).map(str::to_string),
                lateness: f.get("lateness").is_some_and(|l| !l.is_null()),
                name,
            })
        })
        .collect()
}

fn parse_type(raw: &Json, owner: &str) -> Result<ColumnType, String> {
    let kind = match raw.get("type").and_then(Json::as_str) {
        Some(name) => TYPE_NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, k)| *k)
            .ok_or_else(|| {
                let known: Vec<&str> = TYPE_NAMES.iter().map(|(n, _)| *n).collect();
                format!(
                    "{owner}: unknown type `{name}` (known: {})",
                    known.join(" ")
                )
            })?,
        None if raw.get("fields").is_some() => TypeKind::Struct,
        None => {
            return Err(format!(
                "{owner}: column type has neither `type` nor `fields`"
            ))
        }
    };
    let sub = |key: &str| -> Result<Option<Box<ColumnType>>, String> {
        match raw.get(key) {
            None | Some(Json::Null) => Ok(None),
            Some(t) => Ok(Some(Box::new(parse_type(t, &format!("{owner} {key}"))?))),
        }
    };
    let ct = ColumnType {
        kind,
        nullable: bool_field(raw, "nullable"),
        precision: raw.get("precision").and_then(Json::as_i64),
        scale: raw.get("scale").and_then(Json::as_i64),
        component: sub("component")?,
        key: sub("key")?,
        value: sub("value")?,
        fields: match kind {
            TypeKind::Struct => parse_fields(raw.get("fields"), owner)?,
            _ => Vec::new(),
        },
    };
    check_complete(&ct, owner)?;
    Ok(ct)
}

fn check_complete(ct: &ColumnType, owner: &str) -> Result<(), String> {
    match ct.kind {
        TypeKind::Array if ct.component.is_none() => {
            Err(format!("{owner}: ARRAY needs a `component` type"))
        }
        TypeKind::Map if ct.key.is_none() || ct.value.is_none() => {
            Err(format!("{owner}: MAP needs `key` and `value` types"))
        }
        _ => Ok(()),
    }
}

fn str_field(raw: &Json, key: &str, owner: &str) -> Result<String, String> {
    raw.get(key)
        .and_then(Json::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("{owner}: `{key}` must be a string"))
}

fn bool_field(raw: &Json, key: &str) -> bool {
    raw.get(key).and_then(Json::as_bool).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::parse(serde_json::json!({
            "inputs": [
                {"name": "t", "case_sensitive": false, "fields": [
                    {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}}
                ], "primary_key": ["id"], "materialized": false, "properties": {}},
                {"name": "TaBle", "case_sensitive": true, "fields": [
                    {"name": "Id", "case_sensitive": true, "columntype": {"type": "integer", "nullable": false}}
                ], "materialized": true, "properties": {}}
            ],
            "outputs": []
        }))
        .expect("valid schema")
    }

    #[test]
    fn unquoted_path_matches_case_insensitively_and_quoted_exactly() {
        let s = schema();
        assert_eq!(s.input_by_path("T"), Some(0));
        assert_eq!(s.input_by_path("\"t\""), Some(0));
        assert_eq!(s.input_by_path("\"TaBle\""), Some(1));
        assert_eq!(s.input_by_path("TaBle"), None, "unquoted folds to `table`");
        assert_eq!(s.input_by_path("\"table\""), None);
    }

    #[test]
    fn absent_primary_key_means_keyless_and_type_names_ignore_case() {
        let s = schema();
        assert_eq!(s.inputs[0].primary_key, Some(vec![0]));
        assert_eq!(s.inputs[1].primary_key, None);
        assert_eq!(s.inputs[1].fields[0].columntype.kind, TypeKind::Integer);
    }

    #[test]
    fn struct_members_in_the_compilers_inline_form_parse() {
        let s = Schema::parse(serde_json::json!({"inputs": [{"name": "t", "fields": [
            {"name": "p", "case_sensitive": false, "columntype": {"nullable": true, "fields": [
                {"name": "first", "nullable": true, "precision": 30, "type": "VARCHAR"},
                {"name": "address", "nullable": true, "fields": {"nullable": false, "fields": [
                    {"name": "zip", "nullable": false, "precision": 5, "type": "CHAR"}]}}]}},
            {"name": "n", "case_sensitive": false, "default": "7",
             "columntype": {"nullable": false, "type": "INTEGER"}}
        ]}], "outputs": []}))
        .expect("compiler-shaped schema");
        let p = &s.inputs[0].fields[0].columntype;
        assert_eq!(p.kind, TypeKind::Struct);
        assert_eq!(p.fields[0].columntype.kind, TypeKind::Varchar);
        let address = &p.fields[1].columntype;
        assert_eq!((address.kind, address.nullable), (TypeKind::Struct, false));
        assert_eq!(address.fields[0].columntype.kind, TypeKind::Char);
        assert_eq!(s.inputs[0].fields[1].default.as_deref(), Some("7"));
    }

    #[test]
    fn a_keyed_table_is_queryable_unless_a_key_column_has_lateness() {
        let table = |lateness: serde_json::Value, materialized: bool| {
            Schema::parse(serde_json::json!({"inputs": [{"name": "t", "fields": [
                {"name": "ts", "columntype": {"type": "TIMESTAMP", "nullable": false}, "lateness": lateness},
                {"name": "v", "columntype": {"type": "INTEGER", "nullable": true}}],
                "primary_key": ["ts"], "materialized": materialized}], "outputs": []}))
            .expect("valid schema")
            .inputs[0]
                .queryable()
        };
        assert!(table(serde_json::Value::Null, false));
        assert!(!table(serde_json::json!("INTERVAL '1' HOUR"), false));
        assert!(table(serde_json::json!("INTERVAL '1' HOUR"), true));
        assert!(schema().inputs[0].queryable() && schema().inputs[1].queryable());
    }

    #[test]
    fn unknown_type_is_rejected_with_the_known_list() {
        let err = Schema::parse(serde_json::json!({"inputs": [{"name": "x", "fields": [
            {"name": "a", "columntype": {"type": "BIGNUM", "nullable": true}}]}], "outputs": []}))
        .unwrap_err();
        assert!(err.contains("BIGNUM") && err.contains("VARCHAR"), "{err}");
    }
}
