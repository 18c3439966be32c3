//! The contract between a PostgreSQL publication and a Feldera program: routes from
//! PostgreSQL tables to Feldera tables, partitions placed on their routes, column mapping
//! and key coverage, over Feldera's schema as `schema` reads it.
//!
//! Everything here is decided once (at startup or when a Relation message arrives) so that
//! the hot path only follows indices and precomputed plans.

pub mod mapping;
pub mod partitions;
pub mod routes;

pub use mapping::{
    key_coverage, plan_mapping, ColumnMapping, FieldCaution, FieldMapping, KeyCoverage, KeyField,
    MappingError, MappingOptions, MappingProblem, PgSource,
};
pub use partitions::{Placement, TruncateScope};
pub use routes::{parse_pair, parse_tables, resolve, PgTable, ResolvedRoute, Route, RouteError};
