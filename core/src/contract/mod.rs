//! The contract between a PostgreSQL publication and a Feldera program: Feldera's schema,
//! routes from PostgreSQL tables to Feldera tables, name rules, column mapping and key
//! coverage.
//!
//! Everything here is decided once (at startup or when a Relation message arrives) so that
//! the hot path only follows indices and precomputed plans.

pub mod mapping;
pub mod names;
pub mod partitions;
pub mod reserved;
pub mod routes;
pub mod schema;
pub mod types;

pub use mapping::{
    key_coverage, plan_mapping, ColumnMapping, FieldCaution, FieldMapping, KeyCoverage, KeyField,
    MappingError, MappingOptions, MappingProblem, PgSource,
};
pub use names::{
    find_field, normalise_row, percent_encode_component, DuplicateColumn, NormalisedRow,
};
pub use partitions::{Placement, TruncateScope};
pub use routes::{parse_pair, parse_tables, resolve, PgTable, ResolvedRoute, Route, RouteError};
pub use schema::{
    parse_pipeline, parse_program_schema, FaultTolerance, PipelineInfo, Schema, SchemaError, Side,
    Table, UnreadableRelation,
};
pub use types::{ColumnType, Field, Name, SqlType};
