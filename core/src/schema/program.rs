//! Feldera's program schema: the pipeline GET answer (or its `program_info.schema`) parsed
//! into [`Schema`].
//!
//! Owns the JSON shape (mirrored with serde structs, then converted so that every problem is
//! reported with its JSON path and what is accepted there). Never decides routing or mapping:
//! it only says what tables and views exist and what their columns are.
//!
//! A relation whose columns use a type slotline does not model (views may carry INTERVAL or
//! NULL columns, newer Feldera versions may add types) does not fail the whole schema: it is
//! kept in [`Schema::unreadable`] with its error, and the error surfaces only if a route
//! targets it. Structural garbage (wrong JSON shapes) fails the whole parse.

use super::types::{ColumnType, Field, Name, SqlType};
use serde::Deserialize;
use serde_json::Value;
use std::fmt;

/// A table or view of the Feldera program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub name: Name,
    /// In the program's declaration order; this is the order rows are encoded in.
    pub fields: Vec<Field>,
    /// The PRIMARY KEY columns, spelled as in `fields`; `None` when the table has none.
    pub primary_key: Option<Vec<Name>>,
    pub materialized: bool,
}

impl Table {
    /// Whether Feldera answers ad-hoc queries on this relation: one declared `materialized`,
    /// or a table with a primary key none of whose key columns has a LATENESS (the compiler
    /// keeps such tables queryable without the attribute; see docs/feldera.md).
    pub fn queryable(&self) -> bool {
        self.materialized
            || self.primary_key.as_ref().is_some_and(|key| {
                key.iter().all(|name| {
                    self.fields
                        .iter()
                        .find(|f| f.name == *name)
                        .is_some_and(|f| f.lateness.is_none())
                })
            })
    }
}

/// Whether a relation is a table (input) or a view (output).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Input,
    Output,
}

/// A relation that exists but whose columns slotline cannot describe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnreadableRelation {
    pub name: Name,
    pub side: Side,
    pub error: SchemaError,
}

/// The tables and views of a compiled Feldera program.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schema {
    pub inputs: Vec<Table>,
    pub outputs: Vec<Table>,
    pub unreadable: Vec<UnreadableRelation>,
}

/// What the pipeline GET answer says beyond the schema, for startup logs and errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineInfo {
    /// The pipeline's `id`: a pipeline deleted and created again under the same name has
    /// another one.
    pub id: Option<String>,
    pub name: Option<String>,
    pub program_status: Option<String>,
    pub deployment_status: Option<String>,
    /// Where an operator asked the pipeline to go (`Running`, `Paused`, `Stopped`, ...).
    pub deployment_desired_status: Option<String>,
    pub schema: Schema,
    /// `runtime_config.fault_tolerance.model`: what of the pipeline's state survives a
    /// restart of the pipeline process.
    pub fault_tolerance: FaultTolerance,
    /// How often Feldera checkpoints on its own, in seconds, as Feldera applies it
    /// (`runtime_config.fault_tolerance.checkpoint_interval_secs`, forced into 1 to 3600);
    /// `None` when it never does: fault tolerance off, or the interval set to `null`.
    pub checkpoint_interval_secs: Option<u64>,
}

/// Feldera's fault-tolerance model (`runtime_config.fault_tolerance.model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultTolerance {
    /// Off (Feldera's default): a restarted pipeline comes back with empty tables, or from a
    /// checkpoint an operator requested.
    None,
    /// Back to the last checkpoint; input after it is replayed by connectors that can.
    AtLeastOnce,
    /// Back to the last checkpoint, plus a journal of the input after it.
    ExactlyOnce,
}

impl FaultTolerance {
    /// The model as Feldera spells it.
    pub fn name(self) -> &'static str {
        match self {
            FaultTolerance::None => "none",
            FaultTolerance::AtLeastOnce => "at_least_once",
            FaultTolerance::ExactlyOnce => "exactly_once",
        }
    }

    /// Whether a restarted pipeline resumes from its last checkpoint on its own.
    pub fn survives_restart(self) -> bool {
        !matches!(self, FaultTolerance::None)
    }
}

impl fmt::Display for FaultTolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a schema could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchemaError {
    /// `program_info` is `null`: the SQL program has not compiled (yet, or at all).
    NotCompiled { program_status: Option<String> },
    /// The bytes are not JSON.
    NotJson { error: String },
    /// The JSON is valid but something at `path` is not what Feldera writes.
    Invalid {
        path: String,
        problem: String,
        accepted: String,
    },
}

impl SchemaError {
    fn invalid(path: &str, problem: impl Into<String>, accepted: impl Into<String>) -> Self {
        SchemaError::Invalid {
            path: path.to_owned(),
            problem: problem.into(),
            accepted: accepted.into(),
        }
    }
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaError::NotCompiled { program_status } => write!(
                f,
                "the Feldera pipeline is not compiled yet (program_info is null, program_status: {}): \
                 its schema exists only once the SQL program compiles; wait for compilation or fix the program",
                program_status.as_deref().unwrap_or("unknown")
            ),
            SchemaError::NotJson { error } => {
                write!(f, "the Feldera pipeline answer is not JSON ({error}); expected the JSON of GET /v0/pipelines/<name>")
            }
            SchemaError::Invalid { path, problem, accepted } => {
                write!(f, "Feldera schema at `{path}`: {problem}; accepted: {accepted}")
            }
        }
    }
}

impl std::error::Error for SchemaError {}

// ---- serde mirror of what Feldera writes (unknown keys ignored on purpose: Feldera adds
// fields over time and slotline needs only these) ----

#[derive(Deserialize)]
struct RawProgramInfo {
    schema: RawSchema,
}

/// Relations stay JSON until each is read on its own: one relation slotline cannot read
/// must not hide the others.
#[derive(Deserialize)]
struct RawSchema {
    inputs: Vec<Value>,
    outputs: Vec<Value>,
}

#[derive(Deserialize)]
struct RawRelation {
    name: String,
    #[serde(default)]
    case_sensitive: bool,
    fields: Vec<RawField>,
    #[serde(default)]
    primary_key: Option<Vec<String>>,
    #[serde(default)]
    materialized: bool,
}

/// A column or a struct member. The compiler writes columns as `{name, case_sensitive,
/// columntype: {...}}` and struct members inline: the type's keys beside `name`, no
/// `case_sensitive`, and a member that is itself a struct as `fields: {fields: [...],
/// nullable}`. Both are read here (docs/feldera.md, "Schema").
#[derive(Deserialize)]
struct RawField {
    name: String,
    #[serde(default)]
    case_sensitive: bool,
    #[serde(default)]
    columntype: Option<RawColumnType>,
    /// The SQL text of the column's DEFAULT, when it has one.
    #[serde(default)]
    default: Option<String>,
    #[serde(default)]
    lateness: Option<String>,
    #[serde(rename = "type", default)]
    type_name: Option<String>,
    #[serde(default)]
    nullable: Option<bool>,
    #[serde(default)]
    precision: Option<i64>,
    #[serde(default)]
    scale: Option<i64>,
    #[serde(default)]
    component: Option<Box<RawColumnType>>,
    #[serde(default)]
    fields: Option<RawMembers>,
    #[serde(default)]
    key: Option<Box<RawColumnType>>,
    #[serde(default)]
    value: Option<Box<RawColumnType>>,
}

/// `fields` of an inline member: its members, or (for a member that is a struct) the
/// struct's whole column type.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawMembers {
    List(Vec<RawField>),
    Struct(Box<RawColumnType>),
}

#[derive(Deserialize)]
struct RawColumnType {
    #[serde(rename = "type", default)]
    type_name: Option<String>,
    nullable: bool,
    #[serde(default)]
    precision: Option<i64>,
    #[serde(default)]
    scale: Option<i64>,
    #[serde(default)]
    component: Option<Box<RawColumnType>>,
    #[serde(default)]
    fields: Option<Vec<RawField>>,
    #[serde(default)]
    key: Option<Box<RawColumnType>>,
    #[serde(default)]
    value: Option<Box<RawColumnType>>,
}

impl RawField {
    /// The member's column type, whichever form it was written in.
    fn into_column_type(self) -> RawColumnType {
        if let Some(columntype) = self.columntype {
            return columntype;
        }
        let fields = match self.fields {
            Some(RawMembers::Struct(columntype)) => return *columntype,
            Some(RawMembers::List(fields)) => Some(fields),
            None => None,
        };
        RawColumnType {
            type_name: self.type_name,
            // Feldera reads an inline member without `nullable` as NOT NULL.
            nullable: self.nullable.unwrap_or(false),
            precision: self.precision,
            scale: self.scale,
            component: self.component,
            fields,
            key: self.key,
            value: self.value,
        }
    }
}

/// Parses Feldera's `GET /v0/pipelines/{name}` answer.
pub fn parse_pipeline(body: &[u8]) -> Result<PipelineInfo, SchemaError> {
    let root: Value = serde_json::from_slice(body).map_err(|e| SchemaError::NotJson {
        error: e.to_string(),
    })?;
    let Value::Object(object) = &root else {
        return Err(SchemaError::invalid(
            "",
            format!("the answer is {}", json_kind(&root)),
            "an object with `program_info` (Feldera's pipeline GET answer)",
        ));
    };
    let program_status = object.get("program_status").map(status_text);
    let info = match object.get("program_info") {
        None => {
            return Err(SchemaError::invalid(
                "program_info",
                "the answer has no `program_info`",
                "the full pipeline GET answer (no `selector` that omits the program)",
            ))
        }
        Some(Value::Null) => return Err(SchemaError::NotCompiled { program_status }),
        Some(info) => info,
    };
    let raw: RawProgramInfo = from_value_at("program_info", info)?;
    let (fault_tolerance, checkpoint_interval_secs) =
        read_fault_tolerance(object.get("runtime_config"))?;
    Ok(PipelineInfo {
        id: object.get("id").and_then(Value::as_str).map(str::to_owned),
        name: object
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned),
        program_status,
        deployment_status: object.get("deployment_status").map(status_text),
        deployment_desired_status: object.get("deployment_desired_status").map(status_text),
        schema: convert_schema("program_info.schema", raw.schema)?,
        fault_tolerance,
        checkpoint_interval_secs,
    })
}

/// What `runtime_config.fault_tolerance` may be, for errors.
const FT_ACCEPTED: &str = "what Feldera accepts there: absent or null (fault tolerance off), \
     an object {\"model\": \"none\", \"at_least_once\" or \"exactly_once\" (default \
     exactly_once), \"checkpoint_interval_secs\": seconds or null (default 60)}, or the legacy \
     strings \"initial_state\" and \"latest_checkpoint\" (exactly_once)";

/// Feldera's default `checkpoint_interval_secs`, and the range it forces values into.
const DEFAULT_CHECKPOINT_INTERVAL_SECS: u64 = 60;
const CHECKPOINT_INTERVAL_RANGE: (u64, u64) = (1, 3600);

/// Reads `runtime_config.fault_tolerance` as Feldera's serde does (`FtConfig` and
/// `deserialize_fault_tolerance`; docs/feldera.md): absent or null is off; a map
/// without `model` is exactly_once (`"none"`, in any case, is off); a map without
/// `checkpoint_interval_secs` checkpoints every 60 s, one with `null` never on its own.
/// The manager re-serializes every configuration it stores (`{"model": "none",
/// "checkpoint_interval_secs": 60}` when off), but older rows may keep older forms.
///
/// Anything Feldera's serde refuses is a [`SchemaError`] naming the path: the manager
/// refuses to store such a configuration and the pipeline cannot start with one, so this
/// never refuses a pipeline Feldera runs. `runtime_config` absent (a test double, a
/// trimmed answer) counts as off, as the empty configuration does in Feldera.
/// Returns the model and the interval in effect (see [`PipelineInfo`]).
fn read_fault_tolerance(
    runtime_config: Option<&Value>,
) -> Result<(FaultTolerance, Option<u64>), SchemaError> {
    const PATH: &str = "runtime_config.fault_tolerance";
    let config = match runtime_config {
        None | Some(Value::Null) => return Ok((FaultTolerance::None, None)),
        Some(Value::Object(config)) => config,
        Some(other) => {
            return Err(SchemaError::invalid(
                "runtime_config",
                format!("the runtime configuration is {}", json_kind(other)),
                "an object (Feldera's RuntimeConfig)",
            ))
        }
    };
    let (model, interval) = match config.get("fault_tolerance") {
        None | Some(Value::Null) => return Ok((FaultTolerance::None, None)),
        Some(Value::String(legacy))
            if matches!(legacy.as_str(), "initial_state" | "latest_checkpoint") =>
        {
            (
                FaultTolerance::ExactlyOnce,
                Some(DEFAULT_CHECKPOINT_INTERVAL_SECS),
            )
        }
        Some(Value::Object(ft)) => {
            let model = match ft.get("model") {
                None => FaultTolerance::ExactlyOnce,
                Some(Value::String(m)) if m.eq_ignore_ascii_case("none") => FaultTolerance::None,
                Some(Value::String(m)) if m == "at_least_once" => FaultTolerance::AtLeastOnce,
                Some(Value::String(m)) if m == "exactly_once" => FaultTolerance::ExactlyOnce,
                Some(other) => {
                    return Err(SchemaError::invalid(
                        &format!("{PATH}.model"),
                        format!("unknown fault tolerance model {other}"),
                        "\"none\", \"at_least_once\" or \"exactly_once\" (absent: exactly_once)",
                    ))
                }
            };
            let interval = match ft.get("checkpoint_interval_secs") {
                None => Some(DEFAULT_CHECKPOINT_INTERVAL_SECS),
                Some(Value::Null) => None,
                Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64(),
                Some(other) => {
                    return Err(SchemaError::invalid(
                        &format!("{PATH}.checkpoint_interval_secs"),
                        format!("the interval is {other}"),
                        "a whole number of seconds, or null (absent: 60)",
                    ))
                }
            };
            (model, interval)
        }
        Some(other) => {
            let shown = match other {
                Value::String(s) => format!("the string {}", Value::String(s.clone())),
                other => json_kind(other).to_owned(),
            };
            return Err(SchemaError::invalid(
                PATH,
                format!("the fault tolerance configuration is {shown}"),
                FT_ACCEPTED,
            ));
        }
    };
    let (min, max) = CHECKPOINT_INTERVAL_RANGE;
    let interval = interval
        .filter(|_| model.survives_restart())
        .map(|secs| secs.clamp(min, max));
    Ok((model, interval))
}

/// Parses a bare program schema (`{"inputs": [...], "outputs": [...]}`).
pub fn parse_program_schema(body: &[u8]) -> Result<Schema, SchemaError> {
    let root: Value = serde_json::from_slice(body).map_err(|e| SchemaError::NotJson {
        error: e.to_string(),
    })?;
    let raw: RawSchema = from_value_at("", &root)?;
    convert_schema("", raw)
}

/// What is accepted where a schema has the wrong shape.
const SHAPE: &str = "the shape Feldera writes: relations with name, case_sensitive, fields \
     [{name, case_sensitive, columntype {type, nullable, ...}}] (struct members inline: \
     {name, type, nullable, ...}), primary_key, materialized";

fn from_value_at<'a, T: Deserialize<'a>>(prefix: &str, value: &'a Value) -> Result<T, SchemaError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let path = join_path(prefix, if inner == "." { "" } else { &inner });
        SchemaError::invalid(&path, e.inner().to_string(), SHAPE)
    })
}

fn join_path(prefix: &str, inner: &str) -> String {
    match (prefix.is_empty(), inner.is_empty()) {
        (true, _) => inner.to_owned(),
        (false, true) => prefix.to_owned(),
        (false, false) if inner.starts_with('[') => format!("{prefix}{inner}"),
        (false, false) => format!("{prefix}.{inner}"),
    }
}

fn status_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        // Feldera reports failed compilations as an object (`{"SqlError": ...}`): name it.
        Value::Object(map) => map.keys().next().cloned().unwrap_or_default(),
        other => other.to_string(),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn convert_schema(path: &str, raw: RawSchema) -> Result<Schema, SchemaError> {
    let mut schema = Schema::default();
    for (side, relations, label) in [
        (Side::Input, raw.inputs, "inputs"),
        (Side::Output, raw.outputs, "outputs"),
    ] {
        for (i, value) in relations.into_iter().enumerate() {
            let at = join_path(path, &format!("{label}[{i}]"));
            let name = relation_name(&at, &value)?;
            let read = from_value_at::<RawRelation>(&at, &value)
                .and_then(|relation| convert_relation(&at, relation));
            match read {
                Ok(table) if side == Side::Input => schema.inputs.push(table),
                Ok(table) => schema.outputs.push(table),
                Err(error) => schema
                    .unreadable
                    .push(UnreadableRelation { name, side, error }),
            }
        }
    }
    Ok(schema)
}

/// The name of a relation slotline may fail to read, so that the failure can be reported
/// when (and only when) a route targets it. A relation without a name is structural
/// garbage and fails the whole schema.
fn relation_name(path: &str, value: &Value) -> Result<Name, SchemaError> {
    let name = value.get("name").and_then(Value::as_str).ok_or_else(|| {
        SchemaError::invalid(
            &join_path(path, "name"),
            format!(
                "a relation's `name` is {}",
                json_kind(value.get("name").unwrap_or(&Value::Null))
            ),
            SHAPE,
        )
    })?;
    let case_sensitive = value
        .get("case_sensitive")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(Name {
        name: name.to_owned(),
        case_sensitive,
    })
}

fn convert_relation(path: &str, raw: RawRelation) -> Result<Table, SchemaError> {
    let fields = convert_fields(&format!("{path}.fields"), raw.fields)?;
    let primary_key = match raw.primary_key {
        None => None,
        Some(keys) => Some(resolve_key(&format!("{path}.primary_key"), &keys, &fields)?),
    };
    Ok(Table {
        name: Name {
            name: raw.name,
            case_sensitive: raw.case_sensitive,
        },
        fields,
        primary_key,
        materialized: raw.materialized,
    })
}

fn convert_fields(path: &str, raw: Vec<RawField>) -> Result<Vec<Field>, SchemaError> {
    let mut fields: Vec<Field> = Vec::with_capacity(raw.len());
    for (i, field) in raw.into_iter().enumerate() {
        let at = format!("{path}[{i}]");
        let name = Name {
            name: field.name.clone(),
            case_sensitive: field.case_sensitive,
        };
        if let Some(earlier) = fields.iter().find(|f| f.name.same_as(&name)) {
            return Err(SchemaError::invalid(
                &format!("{at}.name"),
                format!("column {name} repeats column {}", earlier.name),
                "distinct column names",
            ));
        }
        let at = if field.columntype.is_some() {
            format!("{at}.columntype")
        } else {
            at
        };
        let default = field.default.clone();
        let lateness = field.lateness.clone();
        let columntype = convert_type(&at, field.into_column_type())?;
        fields.push(Field {
            name,
            columntype,
            default,
            lateness,
        });
    }
    Ok(fields)
}

fn resolve_key(path: &str, keys: &[String], fields: &[Field]) -> Result<Vec<Name>, SchemaError> {
    let mut resolved: Vec<Name> = Vec::with_capacity(keys.len());
    for (i, key) in keys.iter().enumerate() {
        let found = fields
            .iter()
            .find(|f| f.name.name == *key)
            .or_else(|| fields.iter().find(|f| f.name.matches(key)));
        let Some(field) = found else {
            let names: Vec<String> = fields.iter().map(|f| f.name.to_string()).collect();
            return Err(SchemaError::invalid(
                &format!("{path}[{i}]"),
                format!("key column `{key}` is not a column of the relation"),
                format!("one of its columns: {}", names.join(", ")),
            ));
        };
        if resolved.contains(&field.name) {
            return Err(SchemaError::invalid(
                &format!("{path}[{i}]"),
                format!("key column `{key}` is listed twice"),
                "each key column once",
            ));
        }
        resolved.push(field.name.clone());
    }
    Ok(resolved)
}

/// Every accepted spelling of `type`, for error messages.
fn accepted_types() -> String {
    let mut names: Vec<&str> = SqlType::NAMED.iter().map(|(_, name)| *name).collect();
    names.push("STRUCT (or no `type`, with `fields`)");
    names.join(", ")
}

fn convert_type(path: &str, raw: RawColumnType) -> Result<ColumnType, SchemaError> {
    let sql = match raw.type_name.as_deref() {
        None | Some("STRUCT" | "struct" | "Struct") => SqlType::Struct,
        Some(name) => SqlType::from_name(name).ok_or_else(|| {
            SchemaError::invalid(
                &format!("{path}.type"),
                format!("unknown column type `{name}`"),
                accepted_types(),
            )
        })?,
    };
    let mut ty = ColumnType::new(sql, raw.nullable);
    ty.precision = raw.precision;
    ty.scale = raw.scale;
    match sql {
        SqlType::Array => {
            let component = require(path, "component", "an ARRAY", raw.component)?;
            ty.component = Some(Box::new(convert_type(
                &format!("{path}.component"),
                *component,
            )?));
        }
        SqlType::Map => {
            let key = require(path, "key", "a MAP", raw.key)?;
            let value = require(path, "value", "a MAP", raw.value)?;
            ty.key = Some(Box::new(convert_type(&format!("{path}.key"), *key)?));
            ty.value = Some(Box::new(convert_type(&format!("{path}.value"), *value)?));
        }
        SqlType::Struct => {
            let fields = require(path, "fields", "a struct", raw.fields)?;
            ty.fields = convert_fields(&format!("{path}.fields"), fields)?;
        }
        _ => {}
    }
    Ok(ty)
}

fn require<T>(path: &str, key: &str, what: &str, value: Option<T>) -> Result<T, SchemaError> {
    value.ok_or_else(|| {
        SchemaError::invalid(
            &format!("{path}.{key}"),
            format!("{what} column type has no `{key}`"),
            format!("`{key}` describing the {}", describe_part(key)),
        )
    })
}

fn describe_part(key: &str) -> &'static str {
    match key {
        "component" => "element type",
        "key" => "key type",
        "value" => "value type",
        _ => "struct's fields",
    }
}

#[cfg(test)]
#[path = "program_tests.rs"]
mod tests;
