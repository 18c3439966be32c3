//! Feldera's side of the contract: the program schema as the pipeline manager describes it
//! (`program`: tables, columns, keys, and the pipeline's fault tolerance), the column types
//! (`types`), and Feldera's rules for names (`names`, `reserved`).
//!
//! Plain data and parsers; the values, the mapping and the requests build on it.

pub mod names;
pub mod program;
pub mod reserved;
pub mod types;

pub use names::{
    find_field, normalise_row, percent_encode_component, DuplicateColumn, NormalisedRow,
};
pub use program::{
    parse_pipeline, parse_program_schema, FaultTolerance, PipelineInfo, Schema, SchemaError, Side,
    Table, UnreadableRelation,
};
pub use types::{ColumnType, Field, Name, SqlType};
