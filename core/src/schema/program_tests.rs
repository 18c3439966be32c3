use super::*;
use crate::schema::{ColumnType, Name, SqlType};
use insta::assert_snapshot;

/// A relation in the shape the pipeline GET answer carries.
const RELATION_T: &str = r#"{"name":"t","case_sensitive":false,
 "fields":[{"name":"id","case_sensitive":false,"columntype":{"type":"BIGINT","nullable":false}},
           {"name":"amount","case_sensitive":false,"columntype":{"type":"DECIMAL","nullable":true,"precision":10,"scale":2}},
           {"name":"tags","case_sensitive":false,"columntype":{"type":"ARRAY","nullable":true,"component":{"type":"VARCHAR","nullable":true,"precision":-1}}}],
 "primary_key":["id"],"materialized":false,"properties":{}}"#;

const ERROR_VIEW: &str = r#"{"name":"error_view","case_sensitive":false,"fields":[
 {"name":"table_or_view_name","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":false,"precision":-1}}],
 "materialized":false,"properties":{}}"#;

fn pipeline_with(inputs: &str, outputs: &str) -> String {
    format!(
        r#"{{"name":"p","program_status":"Success","deployment_status":"Running",
            "program_info":{{"schema":{{"inputs":[{inputs}],"outputs":[{outputs}]}},"udf_stubs":""}}}}"#
    )
}

fn schema_error(body: &str) -> SchemaError {
    parse_program_schema(body.as_bytes()).unwrap_err()
}

fn column(name: &str, columntype: &str) -> String {
    format!(r#"{{"name":"{name}","case_sensitive":false,"columntype":{columntype}}}"#)
}

fn single_input(fields: &[String]) -> String {
    format!(
        r#"{{"inputs":[{{"name":"t","case_sensitive":false,"fields":[{}]}}],"outputs":[]}}"#,
        fields.join(",")
    )
}

#[test]
fn feldera_md_relation_example_parses_into_typed_fields() {
    let info = parse_pipeline(pipeline_with(RELATION_T, ERROR_VIEW).as_bytes()).unwrap();
    assert_eq!(info.name.as_deref(), Some("p"));
    assert_eq!(info.program_status.as_deref(), Some("Success"));
    assert_eq!(info.deployment_status.as_deref(), Some("Running"));
    let schema = info.schema;
    assert_eq!(schema.inputs.len(), 1);
    assert!(schema.unreadable.is_empty());
    let t = &schema.inputs[0];
    assert_eq!(t.name, Name::unquoted("t"));
    assert_eq!(t.primary_key, Some(vec![Name::unquoted("id")]));
    assert!(!t.materialized);
    assert!(t.queryable(), "a table with a primary key is queryable");
    let types: Vec<ColumnType> = t.fields.iter().map(|f| f.columntype.clone()).collect();
    assert_eq!(
        types,
        vec![
            ColumnType::new(SqlType::BigInt, false),
            ColumnType::decimal(10, 2, true),
            ColumnType::array_of(
                ColumnType::new(SqlType::Varchar, true).with_precision(-1),
                true
            ),
        ]
    );
    assert_eq!(schema.outputs.len(), 1);
    assert_eq!(schema.outputs[0].name, Name::unquoted("error_view"));
}

#[test]
fn absent_primary_key_is_none_and_only_materialized_tables_stay_queryable() {
    let body = r#"{"inputs":[
        {"name":"bag","case_sensitive":false,"fields":[],"materialized":false},
        {"name":"kept","case_sensitive":false,"fields":[],"materialized":true}],"outputs":[]}"#;
    let schema = parse_program_schema(body.as_bytes()).unwrap();
    assert_eq!(schema.inputs[0].primary_key, None);
    assert!(!schema.inputs[0].queryable());
    assert!(schema.inputs[1].queryable());
}

#[test]
fn type_names_are_case_insensitive_and_nested_types_convert() {
    let body = single_input(&[
        column("ts", r#"{"type":"timestamp_tz","nullable":true}"#),
        column(
            "m",
            r#"{"type":"Map","nullable":true,"key":{"type":"VARCHAR","nullable":false},"value":{"type":"INTEGER","nullable":true}}"#,
        ),
        column(
            "s",
            r#"{"nullable":false,"fields":[{"name":"X","case_sensitive":true,"columntype":{"type":"uuid","nullable":true}}]}"#,
        ),
    ]);
    let schema = parse_program_schema(body.as_bytes()).unwrap();
    let fields = &schema.inputs[0].fields;
    assert_eq!(fields[0].columntype.sql, SqlType::TimestampTz);
    let map = &fields[1].columntype;
    assert_eq!(map.sql, SqlType::Map);
    assert_eq!(map.key.as_deref().map(|k| k.sql), Some(SqlType::Varchar));
    assert_eq!(map.value.as_deref().map(|v| v.sql), Some(SqlType::Integer));
    let st = &fields[2].columntype;
    assert_eq!(st.sql, SqlType::Struct);
    assert_eq!(st.fields[0].name, Name::quoted("X"));
    assert_eq!(st.fields[0].columntype.sql, SqlType::Uuid);
}

#[test]
fn case_sensitive_names_and_key_spelling_are_kept() {
    let body = r#"{"inputs":[{"name":"TaBle","case_sensitive":true,"fields":[
        {"name":"Id","case_sensitive":true,"columntype":{"type":"INTEGER","nullable":false}}],
        "primary_key":["Id"]}],"outputs":[]}"#;
    let schema = parse_program_schema(body.as_bytes()).unwrap();
    assert_eq!(schema.inputs[0].name, Name::quoted("TaBle"));
    assert_eq!(schema.inputs[0].primary_key, Some(vec![Name::quoted("Id")]));
}

#[test]
fn null_program_info_says_the_pipeline_is_not_compiled() {
    let body = r#"{"name":"p","program_status":"CompilingSql","program_info":null}"#;
    let err = parse_pipeline(body.as_bytes()).unwrap_err();
    assert_eq!(
        err,
        SchemaError::NotCompiled {
            program_status: Some("CompilingSql".into())
        }
    );
    assert_snapshot!(err, @"the Feldera pipeline is not compiled yet (program_info is null, program_status: CompilingSql): its schema exists only once the SQL program compiles; wait for compilation or fix the program");
}

#[test]
fn failed_compilation_status_objects_are_named() {
    let body = r#"{"program_status":{"SqlError":[{"message":"x"}]},"program_info":null}"#;
    let err = parse_pipeline(body.as_bytes()).unwrap_err();
    assert_eq!(
        err,
        SchemaError::NotCompiled {
            program_status: Some("SqlError".into())
        }
    );
}

#[test]
fn an_answer_without_program_info_is_refused_with_the_reason() {
    let err = parse_pipeline(br#"{"name":"p"}"#).unwrap_err();
    assert_snapshot!(err, @"Feldera schema at `program_info`: the answer has no `program_info`; accepted: the full pipeline GET answer (no `selector` that omits the program)");
}

#[test]
fn unknown_type_names_list_the_accepted_ones() {
    let body = single_input(&[
        column("a", r#"{"type":"BIGINT","nullable":true}"#),
        column("b", r#"{"type":"INTERVAL_DAY","nullable":true}"#),
    ]);
    let schema = parse_program_schema(body.as_bytes()).unwrap();
    assert!(schema.inputs.is_empty());
    assert_eq!(schema.unreadable.len(), 1);
    assert_eq!(schema.unreadable[0].side, Side::Input);
    assert_snapshot!(schema.unreadable[0].error, @"Feldera schema at `inputs[0].fields[1].columntype.type`: unknown column type `INTERVAL_DAY`; accepted: BOOLEAN, TINYINT, SMALLINT, INTEGER, BIGINT, REAL, DOUBLE, DECIMAL, CHAR, VARCHAR, BINARY, VARBINARY, TIME, DATE, TIMESTAMP, TIMESTAMP_TZ, UUID, VARIANT, ARRAY, MAP, STRUCT (or no `type`, with `fields`)");
}

#[test]
fn a_view_with_an_unmodelled_type_does_not_fail_the_schema() {
    let view = r#"{"name":"v","case_sensitive":false,"fields":[
        {"name":"d","case_sensitive":false,"columntype":{"type":"INTERVAL_DAY","nullable":false}}]}"#;
    let info = parse_pipeline(pipeline_with(RELATION_T, view).as_bytes()).unwrap();
    assert_eq!(info.schema.inputs.len(), 1);
    assert!(info.schema.outputs.is_empty());
    assert_eq!(info.schema.unreadable[0].name, Name::unquoted("v"));
    assert_eq!(info.schema.unreadable[0].side, Side::Output);
}

#[test]
fn an_array_without_component_is_refused_at_its_path() {
    let body = single_input(&[column("a", r#"{"type":"ARRAY","nullable":true}"#)]);
    let schema = parse_program_schema(body.as_bytes()).unwrap();
    assert_snapshot!(schema.unreadable[0].error, @"Feldera schema at `inputs[0].fields[0].columntype.component`: an ARRAY column type has no `component`; accepted: `component` describing the element type");
}

#[test]
fn a_map_without_value_is_refused_at_its_path() {
    let body = single_input(&[column(
        "m",
        r#"{"type":"MAP","nullable":true,"key":{"type":"INTEGER","nullable":false}}"#,
    )]);
    let schema = parse_program_schema(body.as_bytes()).unwrap();
    assert_snapshot!(schema.unreadable[0].error, @"Feldera schema at `inputs[0].fields[0].columntype.value`: a MAP column type has no `value`; accepted: `value` describing the value type");
}

#[test]
fn a_primary_key_naming_no_column_is_refused_listing_the_columns() {
    let body = r#"{"inputs":[{"name":"t","fields":[
        {"name":"a","columntype":{"type":"INTEGER","nullable":false}},
        {"name":"B","case_sensitive":true,"columntype":{"type":"INTEGER","nullable":false}}],
        "primary_key":["id"]}],"outputs":[]}"#;
    let schema = parse_program_schema(body.as_bytes()).unwrap();
    assert_snapshot!(schema.unreadable[0].error, @r#"Feldera schema at `inputs[0].primary_key[0]`: key column `id` is not a column of the relation; accepted: one of its columns: a, "B""#);
}

#[test]
fn duplicate_column_names_are_refused() {
    let body = r#"{"inputs":[{"name":"t","fields":[
        {"name":"a","columntype":{"type":"INTEGER","nullable":false}},
        {"name":"a","case_sensitive":true,"columntype":{"type":"INTEGER","nullable":false}}]}],"outputs":[]}"#;
    let schema = parse_program_schema(body.as_bytes()).unwrap();
    assert_snapshot!(schema.unreadable[0].error, @r#"Feldera schema at `inputs[0].fields[1].name`: column "a" repeats column a; accepted: distinct column names"#);
}

#[test]
fn wrong_json_shapes_name_the_path() {
    let schema = parse_program_schema(
        br#"{"inputs":[{"name":"t","fields":[{"name":"a","columntype":{"type":"INTEGER"}}]}],"outputs":[]}"#,
    )
    .unwrap();
    let SchemaError::Invalid { path, problem, .. } = &schema.unreadable[0].error else {
        panic!("expected Invalid, got {schema:?}");
    };
    assert_eq!(path, "inputs[0].fields[0].columntype");
    assert!(problem.contains("missing field `nullable`"), "{problem}");

    let err = schema_error(r#"{"inputs":{},"outputs":[]}"#);
    assert!(
        matches!(&err, SchemaError::Invalid { path, .. } if path == "inputs"),
        "{err:?}"
    );

    let err =
        parse_pipeline(br#"{"program_info":{"schema":{"inputs":[{"name":7}],"outputs":[]}}}"#)
            .unwrap_err();
    assert!(
        matches!(&err, SchemaError::Invalid { path, .. } if path == "program_info.schema.inputs[0].name"),
        "{err:?}"
    );
}

#[test]
fn non_json_and_non_object_answers_are_refused() {
    assert!(matches!(
        parse_pipeline(b"<html>bad gateway</html>"),
        Err(SchemaError::NotJson { .. })
    ));
    let err = parse_pipeline(b"[1,2]").unwrap_err();
    assert_snapshot!(err, @"Feldera schema at ``: the answer is an array; accepted: an object with `program_info` (Feldera's pipeline GET answer)");
}

#[test]
fn deeply_nested_garbage_is_an_error_not_a_crash() {
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    assert!(parse_pipeline(deep.as_bytes()).is_err());
    let mut nested = String::from(r#"{"type":"INTEGER","nullable":true}"#);
    for _ in 0..200 {
        nested = format!(r#"{{"type":"ARRAY","nullable":true,"component":{nested}}}"#);
    }
    let body = single_input(&[column("a", &nested)]);
    assert!(parse_program_schema(body.as_bytes()).is_err());
}

/// One line per relation: name, key and each column's type, NOT NULL and DEFAULT, struct
/// members nested in braces; unreadable relations with their error.
fn describe(schema: &Schema) -> String {
    fn ty(t: &ColumnType) -> String {
        let inner = match t.sql {
            SqlType::Struct => {
                let members: Vec<String> = t
                    .fields
                    .iter()
                    .map(|f| format!("{} {}", f.name, ty(&f.columntype)))
                    .collect();
                format!("{{{}}}", members.join(", "))
            }
            SqlType::Array => format!("{} ARRAY", t.component.as_deref().map_or("?".into(), ty)),
            SqlType::Map => format!(
                "MAP<{}, {}>",
                t.key.as_deref().map_or("?".into(), ty),
                t.value.as_deref().map_or("?".into(), ty)
            ),
            _ => ColumnType {
                nullable: true,
                ..t.clone()
            }
            .to_string(),
        };
        if t.nullable {
            inner
        } else {
            format!("{inner} NOT NULL")
        }
    }
    let mut out = Vec::new();
    for (side, tables) in [("input", &schema.inputs), ("output", &schema.outputs)] {
        for t in tables {
            let fields: Vec<String> = t
                .fields
                .iter()
                .map(|f| match &f.default {
                    Some(d) => format!("{} {} DEFAULT {d}", f.name, ty(&f.columntype)),
                    None => format!("{} {}", f.name, ty(&f.columntype)),
                })
                .collect();
            let key = t.primary_key.as_ref().map_or("-".into(), |k| {
                k.iter().map(Name::to_string).collect::<Vec<_>>().join(",")
            });
            out.push(format!(
                "{side} {} key={key} materialized={}: {}",
                t.name,
                t.materialized,
                fields.join("; ")
            ));
        }
    }
    for u in &schema.unreadable {
        out.push(format!("unreadable {:?} {}: {}", u.side, u.name, u.error));
    }
    out.join("\n")
}

fn corpus(name: &str) -> Schema {
    let path = format!(
        "{}/src/schema/testdata/schemas/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let body = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    parse_program_schema(&body).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn the_compilers_own_schema_test_output_parses_with_defaults() {
    assert_snapshot!(describe(&corpus("compiler_test_schema.json")));
}

#[test]
fn struct_members_written_inline_parse_as_fields() {
    assert_snapshot!(describe(&corpus("nested_map_of_rows.json")));
}

#[test]
fn a_struct_member_of_an_unmodelled_type_makes_only_its_relation_unreadable() {
    assert_snapshot!(describe(&corpus("struct_member_forms.json")));
}

#[test]
fn every_mapped_type_parses_in_the_compilers_shape() {
    assert_snapshot!(describe(&corpus("every_mapped_type.json")));
}

#[test]
fn a_struct_written_only_with_columntype_members_still_parses() {
    let body = single_input(&[column(
        "s",
        r#"{"nullable":true,"fields":[{"name":"a","case_sensitive":false,"columntype":{"type":"INTEGER","nullable":false}}]}"#,
    )]);
    let schema = parse_program_schema(body.as_bytes()).unwrap();
    assert_eq!(
        describe(&schema),
        "input t key=- materialized=false: s {a INTEGER NOT NULL}"
    );
}

#[test]
fn a_keyed_table_is_queryable_unless_a_key_column_has_lateness() {
    let table = |lateness: &str, materialized: bool| {
        let body = format!(
            r#"{{"inputs":[{{"name":"t","primary_key":["ts"],"materialized":{materialized},"fields":[
            {{"name":"ts","columntype":{{"type":"TIMESTAMP","nullable":false}}{lateness}}}]}}],"outputs":[]}}"#
        );
        parse_program_schema(body.as_bytes())
            .unwrap()
            .inputs
            .remove(0)
    };
    let late = r#","lateness":"INTERVAL '1' HOUR""#;
    assert!(table("", false).queryable());
    assert_eq!(
        table(late, false).fields[0].lateness.as_deref(),
        Some("INTERVAL '1' HOUR")
    );
    assert!(
        !table(late, false).queryable(),
        "registered as a non-materialized input"
    );
    assert!(table(late, true).queryable());
}

/// The pipeline GET answer with `runtime_config` spelled as given (`None`: absent).
fn pipeline_with_runtime_config(runtime_config: Option<&str>) -> String {
    let runtime_config =
        runtime_config.map_or(String::new(), |rc| format!(r#""runtime_config":{rc},"#));
    format!(
        r#"{{"name":"p",{runtime_config}"program_status":"Success","deployment_status":"Running",
            "program_info":{{"schema":{{"inputs":[{RELATION_T}],"outputs":[{ERROR_VIEW}]}}}}}}"#
    )
}

/// The model and the checkpoint interval in effect.
type Durability = (FaultTolerance, Option<u64>);

fn fault_tolerance_of(runtime_config: Option<&str>) -> Result<Durability, SchemaError> {
    parse_pipeline(pipeline_with_runtime_config(runtime_config).as_bytes())
        .map(|info| (info.fault_tolerance, info.checkpoint_interval_secs))
}

#[test]
fn fault_tolerance_is_read_in_every_shape_feldera_accepts() {
    use FaultTolerance::{AtLeastOnce, ExactlyOnce, None as Off};
    let cases: &[(Option<&str>, Durability)] = &[
        // No runtime configuration, or none of fault tolerance: off.
        (None, (Off, None)),
        (Some("null"), (Off, None)),
        (Some("{}"), (Off, None)),
        (Some(r#"{"workers":8,"fault_tolerance":null}"#), (Off, None)),
        // What the manager writes back (it re-serializes every configuration it stores).
        (
            Some(
                r#"{"workers":8,"storage":{"backend":{"name":"default"}},"fault_tolerance":{"model":"none","checkpoint_interval_secs":60}}"#,
            ),
            (Off, None),
        ),
        (Some(r#"{"fault_tolerance":{"model":"NONE"}}"#), (Off, None)),
        (
            Some(r#"{"fault_tolerance":{"model":"at_least_once","checkpoint_interval_secs":60}}"#),
            (AtLeastOnce, Some(60)),
        ),
        (
            Some(r#"{"fault_tolerance":{"model":"exactly_once","checkpoint_interval_secs":15}}"#),
            (ExactlyOnce, Some(15)),
        ),
        // A map without `model` is exactly_once; without an interval, 60 s.
        (Some(r#"{"fault_tolerance":{}}"#), (ExactlyOnce, Some(60))),
        (
            Some(r#"{"fault_tolerance":{"checkpoint_interval_secs":120}}"#),
            (ExactlyOnce, Some(120)),
        ),
        // `null` turns periodic checkpoints off; Feldera forces others into 1..=3600.
        (
            Some(r#"{"fault_tolerance":{"model":"exactly_once","checkpoint_interval_secs":null}}"#),
            (ExactlyOnce, None),
        ),
        (
            Some(r#"{"fault_tolerance":{"checkpoint_interval_secs":0}}"#),
            (ExactlyOnce, Some(1)),
        ),
        (
            Some(r#"{"fault_tolerance":{"checkpoint_interval_secs":86400}}"#),
            (ExactlyOnce, Some(3600)),
        ),
        // The legacy strings.
        (
            Some(r#"{"fault_tolerance":"initial_state"}"#),
            (ExactlyOnce, Some(60)),
        ),
        (
            Some(r#"{"fault_tolerance":"latest_checkpoint"}"#),
            (ExactlyOnce, Some(60)),
        ),
    ];
    for (runtime_config, expected) in cases {
        assert_eq!(
            fault_tolerance_of(*runtime_config).as_ref(),
            Ok(expected),
            "{runtime_config:?}"
        );
    }
}

#[test]
fn fault_tolerance_names_and_restarts() {
    assert_eq!(
        [
            FaultTolerance::None,
            FaultTolerance::AtLeastOnce,
            FaultTolerance::ExactlyOnce
        ]
        .map(|ft| (ft.name(), ft.survives_restart())),
        [
            ("none", false),
            ("at_least_once", true),
            ("exactly_once", true)
        ]
    );
    assert_eq!(FaultTolerance::AtLeastOnce.to_string(), "at_least_once");
}

#[test]
fn fault_tolerance_feldera_refuses_is_an_error_naming_the_path() {
    let err = |rc: &str| fault_tolerance_of(Some(rc)).unwrap_err().to_string();
    assert_snapshot!(err(r#"{"fault_tolerance":{"model":"twice"}}"#), @r#"Feldera schema at `runtime_config.fault_tolerance.model`: unknown fault tolerance model "twice"; accepted: "none", "at_least_once" or "exactly_once" (absent: exactly_once)"#);
    // Feldera reads model names exactly (only "none" in any case).
    assert_snapshot!(err(r#"{"fault_tolerance":{"model":"Exactly_Once"}}"#), @r#"Feldera schema at `runtime_config.fault_tolerance.model`: unknown fault tolerance model "Exactly_Once"; accepted: "none", "at_least_once" or "exactly_once" (absent: exactly_once)"#);
    assert_snapshot!(err(r#"{"fault_tolerance":{"model":null}}"#), @r#"Feldera schema at `runtime_config.fault_tolerance.model`: unknown fault tolerance model null; accepted: "none", "at_least_once" or "exactly_once" (absent: exactly_once)"#);
    assert_snapshot!(err(r#"{"fault_tolerance":{"checkpoint_interval_secs":-5}}"#), @"Feldera schema at `runtime_config.fault_tolerance.checkpoint_interval_secs`: the interval is -5; accepted: a whole number of seconds, or null (absent: 60)");
    assert_snapshot!(err(r#"{"fault_tolerance":"always"}"#), @r#"Feldera schema at `runtime_config.fault_tolerance`: the fault tolerance configuration is the string "always"; accepted: what Feldera accepts there: absent or null (fault tolerance off), an object {"model": "none", "at_least_once" or "exactly_once" (default exactly_once), "checkpoint_interval_secs": seconds or null (default 60)}, or the legacy strings "initial_state" and "latest_checkpoint" (exactly_once)"#);
    assert!(err(r#"{"fault_tolerance":true}"#).contains("is a boolean"));
    assert_snapshot!(err(r#""fast""#), @"Feldera schema at `runtime_config`: the runtime configuration is a string; accepted: an object (Feldera's RuntimeConfig)");
}

#[test]
fn an_uncompiled_program_says_so_whatever_its_fault_tolerance() {
    let body = r#"{"name":"p","program_status":"Pending","runtime_config":{"fault_tolerance":"always"},"program_info":null}"#;
    assert!(matches!(
        parse_pipeline(body.as_bytes()),
        Err(SchemaError::NotCompiled { .. })
    ));
}
