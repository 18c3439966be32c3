//! The contract between a PostgreSQL publication and a Feldera program: Feldera's schema,
//! routes from PostgreSQL tables to Feldera tables, name rules, column mapping and key
//! coverage.

pub mod types;

pub use types::{ColumnType, Field, Name, SqlType};
