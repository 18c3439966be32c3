//! Value decoding: a PostgreSQL value's text output to Feldera JSON, driven by the pair
//! (PostgreSQL type OID, Feldera column type). Shared by pgoutput and COPY, which print values
//! with the same output functions, so one decoder keeps a restart from "changing" rows.
//!
//! `plan` is called once per column when the contract is built and refuses unsupported pairs
//! with both types named and the accepted targets listed; `ValuePlan::write_json` is the hot
//! path, appending one JSON value to the caller's NDJSON buffer without allocating for
//! integers, floats, text, uuids and date-times. The text it expects is what PostgreSQL
//! prints under the pinned session settings (DateStyle=ISO, TimeZone=UTC,
//! IntervalStyle=postgres, bytea_output=hex, extra_float_digits=3, client_encoding=UTF8);
//! anything else is refused with what was expected, never guessed.
//!
//! This module never sees rows, tables or column names: the caller adds them to an error
//! with `ValueError::in_column`.

mod array;
mod datetime;
mod decimal;
mod decode;
pub mod error;
mod escape;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
mod json;
pub mod oid;
mod outcome;
mod plan;
mod record;
mod scalar;
pub mod suggest;
#[cfg(test)]
mod tests;
pub mod types;
mod write;

pub use decode::ValuePlan;
pub use error::{ColumnValueError, ValueError, ValueErrorKind};
pub use plan::{is_known, plan, Unsupported};
pub use types::PgTypes;
