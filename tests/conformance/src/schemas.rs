//! The schema corpus (`core/src/schema/testdata/schemas/`), read by Feldera and by
//! slotline.

use feldera_types::program_schema::{
    ColumnType as FColumnType, Field as FField, ProgramSchema, Relation as FRelation,
    SqlType as FSqlType,
};
use slotline_core::schema::{parse_program_schema, ColumnType, Field, Schema, SqlType, Table};
use std::path::PathBuf;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../core/src/schema/testdata/schemas")
}

pub fn run() -> Vec<(String, Result<(), String>)> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(corpus_dir()) {
        Ok(dir) => dir
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect(),
        Err(e) => {
            return vec![(
                "schema corpus".into(),
                Err(format!("{}: {e}", corpus_dir().display())),
            )]
        }
    };
    files.sort();
    if files.is_empty() {
        return vec![(
            "schema corpus".into(),
            Err("no schema in the corpus".into()),
        )];
    }
    files
        .iter()
        .map(|path| {
            let name = format!(
                "schema {}",
                path.file_name().unwrap_or_default().to_string_lossy()
            );
            (name, check_file(path))
        })
        .collect()
}

fn check_file(path: &PathBuf) -> Result<(), String> {
    let body = std::fs::read(path).map_err(|e| e.to_string())?;
    let feldera: ProgramSchema =
        serde_json::from_slice(&body).map_err(|e| format!("Feldera refuses the schema: {e}"))?;
    let slotline =
        parse_program_schema(&body).map_err(|e| format!("slotline refuses the schema: {e}"))?;
    for (side, relations, tables) in [
        ("input", &feldera.inputs, &slotline.inputs),
        ("output", &feldera.outputs, &slotline.outputs),
    ] {
        for relation in relations {
            check_relation(side, relation, tables, &slotline)?;
        }
    }
    let total = feldera.inputs.len() + feldera.outputs.len();
    let seen = slotline.inputs.len() + slotline.outputs.len() + slotline.unreadable.len();
    if seen != total {
        return Err(format!("Feldera reads {total} relations, slotline {seen}"));
    }
    Ok(())
}

fn check_relation(
    side: &str,
    relation: &FRelation,
    tables: &[Table],
    schema: &Schema,
) -> Result<(), String> {
    let name = relation.name.name();
    let at = format!("{side} {}", relation.name.sql_name());
    let found = tables.iter().find(|t| {
        t.name.canonical() == name && t.name.case_sensitive == relation.name.case_sensitive
    });
    let Some(table) = found else {
        let unreadable = schema
            .unreadable
            .iter()
            .find(|u| u.name.canonical() == name)
            .ok_or_else(|| format!("{at}: slotline has no such relation"))?;
        return match relation
            .fields
            .iter()
            .find_map(|f| unmodelled(&f.columntype))
        {
            Some(_) => Ok(()),
            None => Err(format!(
                "{at}: slotline cannot read it ({}) but every type in it is one slotline models",
                unreadable.error
            )),
        };
    };
    if table.materialized != relation.materialized {
        return Err(format!(
            "{at}: materialized {} vs Feldera {}",
            table.materialized, relation.materialized
        ));
    }
    let keys: Option<Vec<String>> = table
        .primary_key
        .as_ref()
        .map(|k| k.iter().map(|n| n.name.clone()).collect());
    if keys != relation.primary_key {
        return Err(format!(
            "{at}: key {keys:?} vs Feldera {:?}",
            relation.primary_key
        ));
    }
    compare_fields(&at, &table.fields, &relation.fields)
}

fn compare_fields(at: &str, ours: &[Field], theirs: &[FField]) -> Result<(), String> {
    if ours.len() != theirs.len() {
        return Err(format!(
            "{at}: {} fields vs Feldera {}",
            ours.len(),
            theirs.len()
        ));
    }
    for (o, t) in ours.iter().zip(theirs) {
        let here = format!("{at}.{}", t.name.sql_name());
        if o.name.canonical() != t.name.name() {
            return Err(format!("{here}: slotline names it {}", o.name));
        }
        if o.name.case_sensitive != t.name.case_sensitive {
            return Err(format!(
                "{here}: case_sensitive {} vs Feldera {}",
                o.name.case_sensitive, t.name.case_sensitive
            ));
        }
        if o.default != t.default {
            return Err(format!(
                "{here}: DEFAULT {:?} vs Feldera {:?}",
                o.default, t.default
            ));
        }
        compare_types(&here, &o.columntype, &t.columntype)?;
    }
    Ok(())
}

fn compare_types(at: &str, o: &ColumnType, t: &FColumnType) -> Result<(), String> {
    let theirs = t.typ.as_wire_str();
    if o.sql.name() != theirs {
        return Err(format!("{at}: type {} vs Feldera {theirs}", o.sql));
    }
    if o.nullable != t.nullable {
        return Err(format!(
            "{at}: nullable {} vs Feldera {}",
            o.nullable, t.nullable
        ));
    }
    if o.precision != t.precision || o.scale != t.scale {
        return Err(format!(
            "{at}: precision/scale {:?}/{:?} vs Feldera {:?}/{:?}",
            o.precision, o.scale, t.precision, t.scale
        ));
    }
    match o.sql {
        SqlType::Array => match (&o.component, &t.component) {
            (Some(o), Some(t)) => compare_types(&format!("{at}[]"), o, t),
            _ => Err(format!("{at}: ARRAY component missing on one side")),
        },
        SqlType::Map => match (&o.key, &t.key, &o.value, &t.value) {
            (Some(ok), Some(tk), Some(ov), Some(tv)) => {
                compare_types(&format!("{at}.key"), ok, tk)?;
                compare_types(&format!("{at}.value"), ov, tv)
            }
            _ => Err(format!("{at}: MAP key/value missing on one side")),
        },
        SqlType::Struct => compare_fields(at, &o.fields, t.fields.as_deref().unwrap_or_default()),
        _ => Ok(()),
    }
}

/// A Feldera type slotline does not model, anywhere inside `t`.
fn unmodelled(t: &FColumnType) -> Option<FSqlType> {
    if SqlType::from_name(t.typ.as_wire_str()).is_none() && t.typ != FSqlType::Struct {
        return Some(t.typ);
    }
    let nested = [&t.component, &t.key, &t.value];
    nested
        .into_iter()
        .flatten()
        .find_map(|c| unmodelled(c))
        .or_else(|| {
            t.fields
                .iter()
                .flatten()
                .find_map(|f| unmodelled(&f.columntype))
        })
}
