//! The two renderings of `slotline ddl`: Feldera SQL (`CREATE TABLE` statements with a
//! comment per lossy or refused column) and the JSON Feldera's `program_info.schema` would
//! describe those tables with (what the Feldera double's `--schema` accepts).
//!
//! Both are deterministic: the same tables print the same bytes.

use super::tables::{KeySource, TableDdl};
use crate::schema::{ColumnType, Name, SqlType};
use serde_json::{json, Map, Value};

/// The WITH clause every table gets: Feldera answers ad-hoc queries only on a materialized
/// table, and TRUNCATE and a re-snapshot read keys that way.
const WITH_LINE: &str = ") WITH ('materialized' = 'true');";

/// A name as Feldera SQL spells it (quoted when case-sensitive).
fn ident(name: &Name) -> String {
    name.to_string()
}

/// A column type as Feldera SQL spells it; `NOT NULL` only inside (array elements, ROW
/// members): the column's own nullability is the caller's.
fn sql_type(t: &ColumnType) -> String {
    let inner = |t: &ColumnType| {
        let mut text = sql_type(t);
        if !t.nullable {
            text.push_str(" NOT NULL");
        }
        text
    };
    let sized = |name: &str| match t.precision {
        Some(n) if n >= 0 => format!("{name}({n})"),
        _ => name.to_owned(),
    };
    match t.sql {
        SqlType::Decimal => match (t.precision, t.scale) {
            (Some(p), Some(s)) => format!("DECIMAL({p}, {s})"),
            _ => "DECIMAL".to_owned(),
        },
        SqlType::Char | SqlType::Varchar | SqlType::Binary | SqlType::Varbinary => {
            sized(t.sql.name())
        }
        SqlType::TimestampTz => "TIMESTAMP WITH TIME ZONE".to_owned(),
        SqlType::Array => match &t.component {
            Some(component) => format!("{} ARRAY", inner(component)),
            None => "VARCHAR ARRAY".to_owned(),
        },
        SqlType::Map => match (&t.key, &t.value) {
            (Some(k), Some(v)) => format!("MAP<{}, {}>", inner(k), inner(v)),
            _ => "MAP<VARCHAR, VARCHAR>".to_owned(),
        },
        SqlType::Struct => {
            let members: Vec<String> = t
                .fields
                .iter()
                .map(|f| format!("{} {}", ident(&f.name), inner(&f.columntype)))
                .collect();
            format!("ROW({})", members.join(", "))
        }
        sql => sql.name().to_owned(),
    }
}

/// A comment's text on one line.
fn comment(text: &str) -> String {
    format!("-- {}", text.replace(['\n', '\r'], " "))
}

fn table_sql(table: &TableDdl, out: &mut Vec<String>) {
    out.push(comment(&format!("from PostgreSQL table {}", table.source)));
    if !table.partitions.is_empty() {
        let names: Vec<String> = table.partitions.iter().map(ToString::to_string).collect();
        out.push(comment(&format!(
            "{} is partitioned: its partitions ({}) are routed to this table",
            table.source,
            names.join(", ")
        )));
    }
    if table.key_source == KeySource::ReplicaIdentityIndex {
        out.push(comment(
            "the PRIMARY KEY is PostgreSQL's replica identity index (the table has no primary key)",
        ));
    }
    for note in &table.notes {
        out.push(comment(note));
    }
    out.push(format!("CREATE TABLE {} (", ident(&table.name)));
    let key = table.primary_key.as_ref();
    let count = table.fields.len();
    for (i, field) in table.fields.iter().enumerate() {
        for note in &field.notes {
            out.push(format!("    {}", comment(note)));
        }
        let t = &field.field.columntype;
        let null = if t.nullable { "" } else { " NOT NULL" };
        let comma = if i + 1 < count || key.is_some() {
            ","
        } else {
            ""
        };
        out.push(format!(
            "    {} {}{null}{comma}",
            ident(&field.field.name),
            sql_type(t)
        ));
    }
    if let Some(key) = key {
        let names: Vec<String> = key.iter().map(ident).collect();
        out.push(format!("    PRIMARY KEY ({})", names.join(", ")));
    }
    out.push(WITH_LINE.to_owned());
}

/// The lines of the SQL text and, per table, the 1-based line of its WITH clause.
fn sql_lines(tables: &[TableDdl]) -> (Vec<String>, Vec<usize>) {
    let mut out = vec![
        comment("Feldera tables for slotline, one per routed PostgreSQL table (slotline ddl)."),
        comment("Column types as slotline maps them: docs/guide/types.md, \"From PostgreSQL types to Feldera columns\"."),
    ];
    let mut with_lines = Vec::with_capacity(tables.len());
    for table in tables {
        out.push(String::new());
        table_sql(table, &mut out);
        with_lines.push(out.len());
    }
    (out, with_lines)
}

/// Feldera SQL for `tables`.
pub fn render_sql(tables: &[TableDdl]) -> String {
    let (lines, _) = sql_lines(tables);
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

/// A `columntype` object as Feldera's schema writes it.
fn columntype_json(t: &ColumnType) -> Value {
    let mut object = Map::new();
    if t.sql != SqlType::Struct {
        object.insert("type".into(), json!(t.sql.name()));
    }
    object.insert("nullable".into(), json!(t.nullable));
    if let Some(precision) = t.precision {
        object.insert("precision".into(), json!(precision));
    }
    if let Some(scale) = t.scale {
        object.insert("scale".into(), json!(scale));
    }
    if let Some(component) = &t.component {
        object.insert("component".into(), columntype_json(component));
    }
    if t.sql == SqlType::Struct {
        let fields: Vec<Value> = t
            .fields
            .iter()
            .map(|f| field_json(&f.name, &f.columntype))
            .collect();
        object.insert("fields".into(), Value::Array(fields));
    }
    Value::Object(object)
}

fn field_json(name: &Name, columntype: &ColumnType) -> Value {
    json!({
        "name": name.name,
        "case_sensitive": name.case_sensitive,
        "columntype": columntype_json(columntype),
    })
}

/// Where a text sits in the SQL text, as Feldera's schema records a property's place.
fn position(line: usize, text: &str, within: &str) -> Value {
    let start = within.find(text).map_or(1, |i| i + 1);
    json!({
        "start_line_number": line,
        "start_column": start,
        "end_line_number": line,
        "end_column": start + text.len() - 1,
    })
}

/// `{"inputs": [...], "outputs": []}` for `tables`, as Feldera's `program_info.schema`
/// describes the program `render_sql` prints (property positions point into that text).
pub fn render_json(tables: &[TableDdl]) -> String {
    let (_, with_lines) = sql_lines(tables);
    let inputs: Vec<Value> = tables
        .iter()
        .zip(with_lines)
        .map(|(table, line)| {
            let mut relation = Map::new();
            relation.insert("name".into(), json!(table.name.name));
            relation.insert("case_sensitive".into(), json!(table.name.case_sensitive));
            let fields: Vec<Value> = table
                .fields
                .iter()
                .map(|f| field_json(&f.field.name, &f.field.columntype))
                .collect();
            relation.insert("fields".into(), Value::Array(fields));
            if let Some(key) = &table.primary_key {
                let names: Vec<&str> = key.iter().map(|n| n.name.as_str()).collect();
                relation.insert("primary_key".into(), json!(names));
            }
            relation.insert("materialized".into(), json!(true));
            relation.insert(
                "properties".into(),
                json!({"materialized": {
                    "value": "true",
                    "key_position": position(line, "'materialized'", WITH_LINE),
                    "value_position": position(line, "'true'", WITH_LINE),
                }}),
            );
            Value::Object(relation)
        })
        .collect();
    let schema = json!({"inputs": inputs, "outputs": []});
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}
