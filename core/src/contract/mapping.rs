//! Column mapping: how a PostgreSQL relation's columns become a Feldera table's fields.
//!
//! Owns the decisions made once per Relation message: which PostgreSQL column feeds which
//! Feldera field (case rules), whether the types can be converted (`value::plan`), the
//! primary-key policy and whether the replica identity carries Feldera's key. The result is
//! laid out for the hot path: per field, in schema order, a column index and a plan.
//! Never converts values and never logs: warnings are returned as data.

use super::routes::PgTable;
use crate::pgoutput::{Relation, RelationColumn, ReplicaIdentity};
use crate::schema::program::Table;
use crate::schema::types::SqlType;
use crate::schema::types::{ColumnType, Field, Name};
use crate::value::types::TypeKind;
use crate::value::{self, oid, PgTypes, Unsupported, ValuePlan};
use std::fmt;

/// Policy knobs from the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MappingOptions {
    /// `FELDERA_REQUIRE_PRIMARY_KEY`: refuse Feldera tables without a PRIMARY KEY.
    pub require_primary_key: bool,
}

impl Default for MappingOptions {
    fn default() -> Self {
        MappingOptions {
            require_primary_key: true,
        }
    }
}

/// Where a Feldera field's value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PgSource {
    /// Index into the relation's columns (and so into every tuple of that relation).
    pub column: usize,
    pub plan: ValuePlan,
}

/// One Feldera field, in schema order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldMapping {
    pub name: Name,
    /// `name` as a JSON string literal, quotes included: written as is by the encoder.
    pub json_key: String,
    pub nullable: bool,
    /// `None`: PostgreSQL has no such column; the field is omitted and Feldera stores its
    /// DEFAULT, or NULL when it has none.
    pub source: Option<PgSource>,
}

/// One column of Feldera's primary key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyField {
    /// Index into [`ColumnMapping::fields`].
    pub field: usize,
    /// Index into the relation's columns.
    pub column: usize,
}

/// Whether UPDATE/DELETE old images carry what Feldera needs to find the row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyCoverage {
    /// Every Feldera key column is in the replica identity (or, for a table without a key,
    /// the identity is FULL and carries the whole row).
    Covered,
    /// Feldera's table has no key, so a delete must name the whole row; only REPLICA
    /// IDENTITY FULL sends it.
    NeedsFullRow { identity: ReplicaIdentity },
    /// REPLICA IDENTITY NOTHING: PostgreSQL refuses UPDATE and DELETE on the table while it
    /// is published for them.
    IdentityNothing,
    /// These Feldera key columns are not in the replica identity: a delete or key change
    /// cannot name the Feldera row.
    Missing {
        identity: ReplicaIdentity,
        missing: Vec<Name>,
    },
}

impl KeyCoverage {
    pub fn is_covered(&self) -> bool {
        *self == KeyCoverage::Covered
    }
}

impl fmt::Display for KeyCoverage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyCoverage::Covered => f.write_str("the replica identity carries Feldera's key"),
            KeyCoverage::NeedsFullRow { identity } => write!(
                f,
                "the Feldera table has no primary key, so deletes must carry the whole row, but \
                 REPLICA IDENTITY is {}; set REPLICA IDENTITY FULL or give the Feldera table a key",
                identity_name(*identity)
            ),
            KeyCoverage::IdentityNothing => f.write_str(
                "REPLICA IDENTITY is NOTHING: PostgreSQL refuses UPDATE and DELETE on a table \
                 published for them; use DEFAULT with a primary key, USING INDEX, or FULL",
            ),
            KeyCoverage::Missing { identity, missing } => write!(
                f,
                "Feldera key column(s) {} are not in the replica identity ({}), so deletes and \
                 key changes cannot name the Feldera row; make the PostgreSQL key match or set \
                 REPLICA IDENTITY FULL",
                join_names(missing),
                identity_name(*identity)
            ),
        }
    }
}

fn identity_name(identity: ReplicaIdentity) -> &'static str {
    match identity {
        ReplicaIdentity::Default => "DEFAULT",
        ReplicaIdentity::Nothing => "NOTHING",
        ReplicaIdentity::Full => "FULL",
        ReplicaIdentity::Index => "USING INDEX",
    }
}

fn join_names(names: &[Name]) -> String {
    names
        .iter()
        .map(Name::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The mapping of one relation onto one Feldera table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnMapping {
    pub source: PgTable,
    pub table: Name,
    /// Every Feldera field, in schema order.
    pub fields: Vec<FieldMapping>,
    /// Feldera's primary key in key order; `None` when the table has none.
    pub key: Option<Vec<KeyField>>,
    /// Nullable Feldera fields without a DEFAULT that PostgreSQL lacks (Feldera stores NULL).
    pub absent_nullable: Vec<Name>,
    /// Feldera fields with a DEFAULT that PostgreSQL lacks, with the DEFAULT's SQL text:
    /// Feldera gives every ingested row that value.
    pub absent_defaulted: Vec<(Name, String)>,
    /// What Feldera does with some of the mapped columns' values that PostgreSQL would not.
    pub cautions: Vec<FieldCaution>,
    /// PostgreSQL columns Feldera lacks, in relation order (never sent).
    pub skipped_columns: Vec<String>,
    pub key_coverage: KeyCoverage,
}

impl ColumnMapping {
    /// The warnings the shell should log once for this mapping (none when all is well).
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if !self.skipped_columns.is_empty() {
            warnings.push(format!(
                "{} -> {}: PostgreSQL column(s) {} have no Feldera column and are not sent",
                self.source,
                self.table,
                self.skipped_columns.join(", ")
            ));
        }
        if !self.absent_defaulted.is_empty() {
            let fields: Vec<String> = self
                .absent_defaulted
                .iter()
                .map(|(name, default)| format!("{name} (DEFAULT {default})"))
                .collect();
            warnings.push(format!(
                "{} -> {}: Feldera column(s) {} have no PostgreSQL column and take their DEFAULT",
                self.source,
                self.table,
                fields.join(", ")
            ));
        }
        for caution in &self.cautions {
            warnings.push(format!("{} -> {}: {caution}", self.source, self.table));
        }
        if !self.absent_nullable.is_empty() {
            warnings.push(format!(
                "{} -> {}: Feldera column(s) {} have no PostgreSQL column and stay NULL",
                self.source,
                self.table,
                join_names(&self.absent_nullable)
            ));
        }
        if !self.key_coverage.is_covered() {
            warnings.push(format!(
                "{} -> {}: {}",
                self.source, self.table, self.key_coverage
            ));
        }
        warnings
    }
}

/// Something Feldera does with a mapped column's values that PostgreSQL would not; said once
/// per column, when the mapping is made, never per value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldCaution {
    /// The Feldera column declares a length PostgreSQL's column may exceed. Feldera does not
    /// enforce declared lengths on input: a longer value is stored as it is, and slotline
    /// sends it unchanged.
    UncheckedLength {
        field: Name,
        column: String,
        pg_type: String,
        target: ColumnType,
    },
    /// A nullable VARIANT fed from json/jsonb: a document that is the JSON `null` reaches
    /// Feldera as SQL NULL, because Feldera's JSON input reads `null` in a nullable column as
    /// NULL and has no other spelling for a VARIANT null there.
    JsonNullIsSqlNull { field: Name, column: String },
    /// The Feldera column is narrower than PostgreSQL's: a value it cannot hold is refused when it
    /// arrives, which stops the stream with the slot held before it (docs/guide/types.md, "When a
    /// value does not fit").
    Narrowing {
        field: Name,
        column: String,
        pg_type: String,
        target: ColumnType,
        why: String,
    },
}

impl fmt::Display for FieldCaution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldCaution::UncheckedLength {
                field,
                column,
                pg_type,
                target,
            } => write!(
                f,
                "Feldera column {field} is {target} but PostgreSQL column {column} ({pg_type}) may \
                 hold longer values; Feldera does not enforce declared lengths on input, so longer \
                 values are sent and stored unchanged"
            ),
            FieldCaution::Narrowing {
                field,
                column,
                pg_type,
                target,
                why,
            } => write!(
                f,
                "Feldera column {field} is {target}, narrower than PostgreSQL column {column} ({pg_type}): \
                 {why}; such a value stops the stream (exit 1) and the slot waits before its \
                 transaction until the Feldera column is widened (docs/guide/types.md, \"When a value does not fit\")"
            ),
            FieldCaution::JsonNullIsSqlNull { field, column } => write!(
                f,
                "Feldera column {field} is a nullable VARIANT: a value of PostgreSQL column {column} that \
                 is the JSON document null arrives as SQL NULL (Feldera reads null in a nullable column \
                 as NULL and has no other spelling for a VARIANT null); declare the column VARIANT \
                 NOT NULL to keep it a VARIANT null (PostgreSQL NULLs are then refused)"
            ),
        }
    }
}

/// One reason a relation cannot be mapped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MappingProblem {
    NoPrimaryKey,
    MissingNotNull {
        field: Name,
        columntype: ColumnType,
    },
    MissingKey {
        field: Name,
    },
    Ambiguous {
        field: Name,
        columns: Vec<String>,
    },
    Unsupported {
        field: Name,
        column: String,
        error: Unsupported,
    },
}

impl fmt::Display for MappingProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MappingProblem::NoPrimaryKey => f.write_str(
                "the Feldera table has no PRIMARY KEY, so replayed changes would be counted twice; \
                 accepted: a PRIMARY KEY in the Feldera program, or FELDERA_REQUIRE_PRIMARY_KEY=false",
            ),
            MappingProblem::MissingNotNull { field, columntype } => write!(
                f,
                "Feldera column {field} ({columntype}) has no PostgreSQL column and no DEFAULT; \
                 accepted: a PostgreSQL column of that name, a DEFAULT on the Feldera column, or a \
                 nullable Feldera column"
            ),
            MappingProblem::MissingKey { field } => write!(
                f,
                "Feldera key column {field} has no PostgreSQL column; accepted: every key column present in PostgreSQL"
            ),
            MappingProblem::Ambiguous { field, columns } => write!(
                f,
                "Feldera column {field} matches PostgreSQL columns {} (names differing only in case); \
                 accepted: one match, e.g. a quoted Feldera column name",
                columns.join(", ")
            ),
            MappingProblem::Unsupported { field, column, error } => {
                write!(f, "column {column} -> {field}: {error}")
            }
        }
    }
}

/// Every reason a relation cannot be mapped, at once, so one fix round suffices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MappingError {
    pub source: PgTable,
    pub table: Name,
    pub problems: Vec<MappingProblem>,
}

impl fmt::Display for MappingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot map PostgreSQL table {} to Feldera table {}:",
            self.source, self.table
        )?;
        for problem in &self.problems {
            write!(f, "\n  - {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for MappingError {}

/// Maps `relation` onto `table`; `types` describes the column types that are not builtin
/// (domains, composites, enums, ...: what the startup read from the catalog).
pub fn plan_mapping(
    relation: &Relation,
    table: &Table,
    types: &PgTypes,
    options: MappingOptions,
) -> Result<ColumnMapping, MappingError> {
    let source = PgTable {
        schema: relation.namespace.clone(),
        name: relation.name.clone(),
    };
    let mut problems = Vec::new();
    let matched = match_columns(relation, table, &mut problems);
    let mut fields = Vec::with_capacity(table.fields.len());
    let mut absent_nullable = Vec::new();
    let mut absent_defaulted = Vec::new();
    let mut cautions = Vec::new();
    for (field, column) in table.fields.iter().zip(&matched) {
        let source = match source_of(relation, table, types, field, *column) {
            Ok(Some(source)) => {
                if let Some(col) = relation.columns.get(source.column) {
                    cautions.extend(cautions_for(col, types, field));
                }
                Some(source)
            }
            Ok(None) => {
                match &field.default {
                    Some(default) => absent_defaulted.push((field.name.clone(), default.clone())),
                    None => absent_nullable.push(field.name.clone()),
                }
                None
            }
            Err(problem) => {
                problems.push(problem);
                None
            }
        };
        fields.push(FieldMapping {
            name: field.name.clone(),
            json_key: field.name.json_key(),
            nullable: field.columntype.nullable,
            source,
        });
    }
    if table.primary_key.is_none() && options.require_primary_key {
        problems.push(MappingProblem::NoPrimaryKey);
    }
    if !problems.is_empty() {
        return Err(MappingError {
            source,
            table: table.name.clone(),
            problems,
        });
    }
    let key = key_fields(table, &fields);
    let skipped_columns = relation
        .columns
        .iter()
        .enumerate()
        .filter(|(i, _)| !matched.contains(&Some(*i)))
        .map(|(_, c)| c.name.clone())
        .collect();
    Ok(ColumnMapping {
        key_coverage: key_coverage(relation, key.as_deref(), &fields),
        source,
        table: table.name.clone(),
        fields,
        key,
        absent_nullable,
        absent_defaulted,
        cautions,
        skipped_columns,
    })
}

/// The cautions one mapped column earns (see [`FieldCaution`]); a domain column earns those
/// of its base type, with the domain's modifier.
fn cautions_for(column: &RelationColumn, types: &PgTypes, field: &Field) -> Vec<FieldCaution> {
    let base_oid = types
        .resolve(column.type_oid, column.type_modifier)
        .map_or(column.type_oid, |base| base.oid);
    let mut cautions = Vec::new();
    let mut target = &field.columntype;
    while target.sql == SqlType::Array {
        match target.component.as_deref() {
            Some(component) => target = component,
            None => break,
        }
    }
    let declared = match target.sql {
        SqlType::Char | SqlType::Varchar | SqlType::Binary | SqlType::Varbinary => {
            target.precision.filter(|n| *n >= 0)
        }
        _ => None,
    };
    if let Some(limit) = declared {
        if pg_max_length(types, column.type_oid, column.type_modifier).is_none_or(|max| max > limit)
        {
            cautions.push(FieldCaution::UncheckedLength {
                field: field.name.clone(),
                column: column.name.clone(),
                pg_type: types.name(column.type_oid).into_owned(),
                target: field.columntype.clone(),
            });
        }
    }
    if let Some((element, type_modifier)) = element_of(types, column.type_oid, column.type_modifier)
    {
        if let Some(why) = narrowing(element, type_modifier, target) {
            cautions.push(FieldCaution::Narrowing {
                field: field.name.clone(),
                column: column.name.clone(),
                pg_type: types.name(column.type_oid).into_owned(),
                target: field.columntype.clone(),
                why,
            });
        }
    }
    let json = matches!(base_oid, oid::JSON | oid::JSONB);
    if json && field.columntype.sql == SqlType::Variant && field.columntype.nullable {
        cautions.push(FieldCaution::JsonNullIsSqlNull {
            field: field.name.clone(),
            column: column.name.clone(),
        });
    }
    cautions
}

/// Why values of PostgreSQL type `source` (with `typmod`) may not fit `target`, for the
/// pairs whose values are checked one by one on arrival: integers into a narrower integer,
/// `numeric` into a `DECIMAL` with fewer integer or fraction digits. (Declared lengths are
/// `UncheckedLength`: Feldera does not enforce them.) `None` when every value fits.
fn narrowing(source: u32, typmod: i32, target: &ColumnType) -> Option<String> {
    let target_bits = match target.sql {
        SqlType::TinyInt => Some(8),
        SqlType::SmallInt => Some(16),
        SqlType::Integer => Some(32),
        SqlType::BigInt => Some(64),
        _ => None,
    };
    // `oid` is unsigned 32-bit: it needs 33 signed bits.
    let source_bits = match source {
        oid::INT2 => Some(16),
        oid::INT4 => Some(32),
        oid::OID => Some(33),
        oid::INT8 => Some(64),
        _ => None,
    };
    if let (Some(from), Some(to)) = (source_bits, target_bits) {
        return (from > to).then(|| {
            format!(
                "it holds integers outside {}'s {to}-bit range",
                target.sql.name()
            )
        });
    }
    if source == oid::NUMERIC && target.sql == SqlType::Decimal {
        let (Some(p), Some(s)) = (target.precision, target.scale) else {
            return None;
        };
        return match numeric_precision(typmod) {
            None => Some(format!(
                "numeric without a declared precision holds more than DECIMAL({p}, {s})'s {} integer and {s} fraction digits",
                p - s
            )),
            Some((pp, ps)) if ps > s || pp - ps > p - s => Some(format!(
                "numeric({pp}, {ps}) holds up to {} integer and {ps} fraction digits, DECIMAL({p}, {s}) {} and {s}",
                pp - ps,
                p - s
            )),
            Some(_) => None,
        };
    }
    None
}

/// A `numeric(p, s)` column's precision and scale from its type modifier; `None` without
/// them (an unconstrained `numeric`).
fn numeric_precision(typmod: i32) -> Option<(i64, i64)> {
    let packed = typmod.checked_sub(4).filter(|_| typmod >= 4)?;
    let precision = i64::from((packed >> 16) & 0xFFFF);
    // The scale is 11 bits, signed (PostgreSQL 15 accepts negative scales).
    let scale = i64::from(((packed & 0x7FF) ^ 0x400) - 0x400);
    Some((precision, scale))
}

/// The element type of `pg_type` (itself when not an array) and its modifier, domains
/// resolved on both levels; `None` when the catalog does not say.
fn element_of(types: &PgTypes, pg_type: u32, type_modifier: i32) -> Option<(u32, i32)> {
    let outer = types.resolve(pg_type, type_modifier)?;
    let element = match types.get(outer.oid).map(|info| &info.kind) {
        Some(TypeKind::Array { element, .. }) => *element,
        _ => oid::array_element(outer.oid).unwrap_or(outer.oid),
    };
    let element = types.resolve(element, outer.type_modifier)?;
    Some((element.oid, element.type_modifier))
}

/// The most characters a PostgreSQL `varchar(n)`/`char(n)` type (or an array of them, or a
/// domain over either) holds: its type modifier less the 4-byte header; `None` when
/// unlimited or unknown.
fn pg_max_length(types: &PgTypes, pg_type: u32, type_modifier: i32) -> Option<i64> {
    match element_of(types, pg_type, type_modifier)? {
        (oid::VARCHAR | oid::BPCHAR, modifier) if modifier >= 4 => Some(i64::from(modifier) - 4),
        _ => None,
    }
}

/// The source of one field; `Ok(None)` when PostgreSQL lacks the column and Feldera may fill
/// it (with its DEFAULT, or NULL).
// Called once per field when a Relation arrives, never per row: the error's size is moot.
#[allow(clippy::result_large_err)]
fn source_of(
    relation: &Relation,
    table: &Table,
    types: &PgTypes,
    field: &Field,
    column: Option<usize>,
) -> Result<Option<PgSource>, MappingProblem> {
    let Some((index, col)) = column.and_then(|c| relation.columns.get(c).map(|col| (c, col)))
    else {
        let is_key = table
            .primary_key
            .as_ref()
            .is_some_and(|key| key.contains(&field.name));
        return if is_key {
            Err(MappingProblem::MissingKey {
                field: field.name.clone(),
            })
        } else if field.columntype.nullable || field.default.is_some() {
            Ok(None)
        } else {
            Err(MappingProblem::MissingNotNull {
                field: field.name.clone(),
                columntype: field.columntype.clone(),
            })
        };
    };
    match value::plan(types, col.type_oid, &field.columntype) {
        Ok(plan) => Ok(Some(PgSource {
            column: index,
            plan,
        })),
        Err(error) => Err(MappingProblem::Unsupported {
            field: field.name.clone(),
            column: col.name.clone(),
            error,
        }),
    }
}

/// For each Feldera field, the PostgreSQL column feeding it. Exact spellings are matched
/// first so that a quoted `"ID"` and an unquoted `id` each find their own column; then
/// unquoted fields match the remaining columns case-insensitively.
fn match_columns(
    relation: &Relation,
    table: &Table,
    problems: &mut Vec<MappingProblem>,
) -> Vec<Option<usize>> {
    let columns = &relation.columns;
    let mut claimed = vec![false; columns.len()];
    let mut matched: Vec<Option<usize>> = table
        .fields
        .iter()
        .map(|field| {
            let index = columns.iter().position(|c| c.name == field.name.name)?;
            let slot = claimed.get_mut(index)?;
            *slot = true;
            Some(index)
        })
        .collect();
    for (field, slot) in table.fields.iter().zip(matched.iter_mut()) {
        if slot.is_some() || field.name.case_sensitive {
            continue;
        }
        let candidates: Vec<usize> = columns
            .iter()
            .enumerate()
            .filter(|(i, c)| {
                !claimed.get(*i).copied().unwrap_or(true) && field.name.matches(&c.name)
            })
            .map(|(i, _)| i)
            .collect();
        match candidates.as_slice() {
            [] => {}
            [one] => {
                if let Some(flag) = claimed.get_mut(*one) {
                    *flag = true;
                }
                *slot = Some(*one);
            }
            many => problems.push(MappingProblem::Ambiguous {
                field: field.name.clone(),
                columns: many
                    .iter()
                    .filter_map(|i| columns.get(*i).map(|c| c.name.clone()))
                    .collect(),
            }),
        }
    }
    matched
}

fn key_fields(table: &Table, fields: &[FieldMapping]) -> Option<Vec<KeyField>> {
    let key = table.primary_key.as_ref()?;
    // Every key field has a source here: a missing one was reported as MissingKey.
    Some(
        key.iter()
            .filter_map(|name| {
                let field = fields.iter().position(|f| f.name == *name)?;
                let column = fields.get(field)?.source.as_ref()?.column;
                Some(KeyField { field, column })
            })
            .collect(),
    )
}

/// Whether the relation's replica identity carries Feldera's key (see [`KeyCoverage`]).
pub fn key_coverage(
    relation: &Relation,
    key: Option<&[KeyField]>,
    fields: &[FieldMapping],
) -> KeyCoverage {
    let identity = relation.replica_identity;
    match (identity, key) {
        (ReplicaIdentity::Full, _) => KeyCoverage::Covered,
        (ReplicaIdentity::Nothing, _) => KeyCoverage::IdentityNothing,
        (_, None) => KeyCoverage::NeedsFullRow { identity },
        (_, Some(key)) => {
            let missing: Vec<Name> = key
                .iter()
                .filter(|k| {
                    !relation
                        .columns
                        .get(k.column)
                        .is_some_and(|c| c.in_replica_identity)
                })
                .filter_map(|k| fields.get(k.field).map(|f| f.name.clone()))
                .collect();
            if missing.is_empty() {
                KeyCoverage::Covered
            } else {
                KeyCoverage::Missing { identity, missing }
            }
        }
    }
}

#[cfg(test)]
#[path = "mapping_tests.rs"]
mod tests;
