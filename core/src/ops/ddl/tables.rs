//! `slotline ddl`: the Feldera tables for the routed PostgreSQL tables, as slotline would
//! map them. Each column gets the type `value::suggest` proposes from the type
//! table; the table is then run through the column mapping a start and `check` run
//! (`contract::plan_mapping`), so a pair the mapping refuses becomes VARCHAR with a comment
//! saying why, and every caution it raises (a narrower DECIMAL, a JSON null) becomes a
//! comment too. The key is the primary key, else the replica identity index.
//!
//! Pure: the catalog question beyond the startup's (`KEY_COLUMNS` per table), its parser and
//! the plan of each table; its two renderings are `render`, and the machine that asks is
//! `command`.

use crate::catalog::published::Published;
use crate::catalog::questions::{quote_ident, quote_literal, CatalogError, PublishedTable, Row};
use crate::contract::mapping::{plan_mapping, FieldCaution, MappingOptions, MappingProblem};
use crate::contract::routes::{PgTable, Route};
use crate::pgoutput::Relation;
use crate::schema::names::feldera_ident;
use crate::schema::program::Table;
use crate::schema::{ColumnType, Field, Name, SqlType};
use crate::value::suggest::suggest;
use crate::value::PgTypes;

/// What the catalog says about one column beyond a Relation message: NOT NULL, the array
/// dimensions it was declared with, and its place in the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyColumn {
    pub name: String,
    pub not_null: bool,
    /// `pg_attribute.attndims` (0 when not declared, or not an array).
    pub dimensions: usize,
    /// 1-based position in the primary key (else the replica identity index).
    pub key_position: Option<usize>,
    /// A generated column (stored or, on 18, virtual).
    pub generated: bool,
}

/// Where the key came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySource {
    PrimaryKey,
    ReplicaIdentityIndex,
    None,
}

/// The columns of `table` (live ones, generated ones included, in `attnum` order) with NOT
/// NULL, dimensions and key positions; the fifth column says whether the key index is the
/// primary key (`t`), the replica identity index (`f`) or absent (NULL); the sixth whether
/// the column is generated.
pub fn key_columns_query(schema: &str, table: &str) -> Option<String> {
    let name = format!("{}.{}", quote_ident(schema)?, quote_ident(table)?);
    Some(format!(
        "SELECT a.attname, a.attnotnull, a.attndims, \
           pg_catalog.array_position(k.key, a.attnum), k.is_primary, a.attgenerated <> '' \
         FROM pg_catalog.pg_attribute a \
         LEFT JOIN LATERAL (SELECT i.indkey::int2[] AS key, i.indisprimary AS is_primary \
           FROM pg_catalog.pg_index i WHERE i.indrelid = a.attrelid \
           AND (i.indisprimary OR i.indisreplident) \
           ORDER BY i.indisprimary DESC LIMIT 1) k ON true \
         WHERE a.attrelid = {}::regclass \
           AND a.attnum > 0 AND NOT a.attisdropped \
         ORDER BY a.attnum",
        quote_literal(&name)?
    ))
}

fn bad(problem: impl Into<String>) -> CatalogError {
    CatalogError {
        question: "key columns",
        problem: problem.into(),
    }
}

/// The answer of [`key_columns_query`].
pub fn parse_key_columns(rows: &[Row<'_>]) -> Result<(Vec<KeyColumn>, KeySource), CatalogError> {
    let mut columns = Vec::with_capacity(rows.len());
    let mut source = KeySource::None;
    for row in rows {
        let [name, not_null, dims, position, primary, generated] = row else {
            return Err(bad(format!("row has {} columns, expected 6", row.len())));
        };
        let number = |text: Option<&str>| -> Result<Option<usize>, CatalogError> {
            text.map(|t| {
                t.parse::<usize>()
                    .map_err(|_| bad(format!("{t:?} is not a count")))
            })
            .transpose()
        };
        source = match *primary {
            Some("t") => KeySource::PrimaryKey,
            Some("f") => KeySource::ReplicaIdentityIndex,
            _ => KeySource::None,
        };
        columns.push(KeyColumn {
            name: name
                .ok_or_else(|| bad("a column without a name"))?
                .to_owned(),
            not_null: *not_null == Some("t"),
            dimensions: number(*dims)?.unwrap_or(0),
            key_position: number(*position)?,
            generated: *generated == Some("t"),
        });
    }
    Ok((columns, source))
}

/// The tables a publication publishes, each partition replaced by its root (the leaves
/// are routed to it), each once, in the catalog's order; Feldera names as `feldera_ident`
/// spells them.
pub fn publication_routes(published: &[PublishedTable]) -> Vec<Route> {
    let mut routes: Vec<Route> = Vec::new();
    for table in published {
        let root = table.ancestors.last().unwrap_or(&table.name);
        let source = PgTable {
            schema: root.schema.clone(),
            name: root.table.clone(),
        };
        if routes.iter().all(|r| r.source != source) {
            routes.push(Route {
                destination: feldera_ident(&source.name),
                source,
            });
        }
    }
    routes
}

/// One routed table as the catalog describes it.
#[derive(Clone, Debug)]
pub struct Described {
    pub route: Route,
    pub relation: Relation,
    pub columns: Vec<KeyColumn>,
    pub key_source: KeySource,
    /// Its partitions (empty: not partitioned), as `schema.table`.
    pub partitions: Vec<PgTable>,
    /// What the publication publishes of it (`relation` holds only those columns), and
    /// the columns its column list leaves out.
    pub published: Published,
    pub left_out: Vec<String>,
}

/// One column of a planned table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DdlField {
    pub field: Field,
    /// Why the column loses something or was refused its natural type (one per reason).
    pub notes: Vec<String>,
}

/// One Feldera table, ready to print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableDdl {
    pub source: PgTable,
    pub name: Name,
    pub fields: Vec<DdlField>,
    pub primary_key: Option<Vec<Name>>,
    pub key_source: KeySource,
    pub partitions: Vec<PgTable>,
    /// About the whole table (no key, a key the replica identity does not carry).
    pub notes: Vec<String>,
}

/// A Feldera name that needs no quotes stays unquoted only when it would read back
/// unchanged; a route's unquoted name that is reserved or odd is quoted.
fn table_name(destination: &Name) -> Name {
    match destination.case_sensitive {
        true => destination.clone(),
        false => feldera_ident(&destination.name),
    }
}

/// The Feldera table for `described` (see the module docs).
pub fn plan_table(described: &Described, types: &PgTypes) -> TableDdl {
    let relation = &described.relation;
    let mut fields: Vec<DdlField> = relation
        .columns
        .iter()
        .map(|column| {
            let facts = described.columns.iter().find(|c| c.name == column.name);
            let in_key = facts.is_some_and(|c| c.key_position.is_some());
            let nullable = !(facts.is_some_and(|c| c.not_null) || in_key);
            let dimensions = facts.map_or(0, |c| c.dimensions);
            let s = suggest(
                types,
                column.type_oid,
                column.type_modifier,
                dimensions,
                nullable,
            );
            let mut notes = s.notes;
            if facts.is_some_and(|c| c.generated) {
                notes.push(
                    "a stored generated column the publication publishes: copied and streamed \
                     with its values"
                        .to_owned(),
                );
            }
            DdlField {
                field: Field::new(feldera_ident(&column.name), s.target),
                notes,
            }
        })
        .collect();
    let mut key: Vec<(usize, Name)> = described
        .columns
        .iter()
        .filter_map(|c| Some((c.key_position?, feldera_ident(&c.name))))
        .collect();
    key.sort();
    let primary_key = (!key.is_empty()).then(|| key.into_iter().map(|(_, n)| n).collect());
    let mut table = TableDdl {
        source: described.route.source.clone(),
        name: table_name(&described.route.destination),
        fields: Vec::new(),
        primary_key,
        key_source: described.key_source,
        partitions: described.partitions.clone(),
        notes: publication_notes(described),
    };
    check_with_mapping(relation, &mut table, &mut fields, types);
    table.fields = fields;
    table
}

/// What the publication leaves out of the table: the row filter, the columns its column
/// list leaves out, and the generated columns it does not publish (left to Feldera).
fn publication_notes(described: &Described) -> Vec<String> {
    let mut notes = Vec::new();
    let source = &described.route.source;
    if !described.published.rows.is_empty() {
        notes.push(format!(
            "row filter: the publication publishes only the rows of {source} where {}, so this \
             table holds only those",
            described.published.rows.describe()
        ));
    }
    let generated = |name: &String| {
        described
            .columns
            .iter()
            .any(|c| &c.name == name && c.generated)
    };
    let left_out: Vec<&str> = described
        .left_out
        .iter()
        .filter(|c| !generated(c))
        .map(String::as_str)
        .collect();
    if !left_out.is_empty() {
        notes.push(format!(
            "the publication's column list leaves out {} of {source}: no column here, since no \
             value of it ever leaves PostgreSQL",
            left_out.join(", ")
        ));
    }
    let unpublished: Vec<&str> = described
        .columns
        .iter()
        .filter(|c| c.generated && !described.relation.columns.iter().any(|r| r.name == c.name))
        .map(|c| c.name.as_str())
        .collect();
    if !unpublished.is_empty() {
        notes.push(format!(
            "generated column(s) {} of {source} are not published (PostgreSQL 18 publishes stored \
             ones with publish_generated_columns = stored): compute them in Feldera, in a view or a \
             column of your own",
            unpublished.join(", ")
        ));
    }
    notes
}

/// Runs the table through the column mapping: a refused pair becomes VARCHAR with the
/// mapping's reason; cautions and an uncovered key become notes.
fn check_with_mapping(
    relation: &Relation,
    table: &mut TableDdl,
    fields: &mut [DdlField],
    types: &PgTypes,
) {
    let options = MappingOptions {
        require_primary_key: false,
    };
    let as_table = |fields: &[DdlField]| Table {
        name: table.name.clone(),
        fields: fields.iter().map(|f| f.field.clone()).collect(),
        primary_key: table.primary_key.clone(),
        materialized: true,
    };
    let mapping = match plan_mapping(relation, &as_table(fields), types, options) {
        Ok(mapping) => Ok(mapping),
        Err(error) => {
            for problem in &error.problems {
                if let MappingProblem::Unsupported { field, error, .. } = problem {
                    if let Some(f) = fields.iter_mut().find(|f| f.field.name == *field) {
                        let nullable = f.field.columntype.nullable;
                        f.field.columntype =
                            ColumnType::new(SqlType::Varchar, nullable).with_precision(-1);
                        f.notes.push(format!("refused: {error}"));
                    }
                } else {
                    table.notes.push(format!("refused: {problem}"));
                }
            }
            plan_mapping(relation, &as_table(fields), types, options)
        }
    };
    let Ok(mapping) = mapping else {
        return; // only non-type problems are left; their notes say what they are
    };
    for caution in &mapping.cautions {
        let field = match caution {
            FieldCaution::UncheckedLength { field, .. }
            | FieldCaution::JsonNullIsSqlNull { field, .. }
            | FieldCaution::Narrowing { field, .. } => field,
        };
        if let Some(f) = fields.iter_mut().find(|f| f.field.name == *field) {
            f.notes.push(format!("lossy: {caution}"));
        }
    }
    if table.primary_key.is_none() {
        table.notes.push(format!(
            "{} has no primary key and no replica identity index: Feldera keeps the table as a \
             multiset, which slotline refuses unless FELDERA_REQUIRE_PRIMARY_KEY=false (and \
             then needs REPLICA IDENTITY FULL); add a PRIMARY KEY in PostgreSQL and run ddl again",
            table.source
        ));
    } else if !mapping.key_coverage.is_covered() {
        table.notes.push(mapping.key_coverage.to_string());
    }
}

#[cfg(test)]
#[path = "tables_tests.rs"]
mod tests;
