//! pgoutput (logical replication protocol 1): message parser and relation cache.
//!
//! This module owns the bytes of an XLogData payload and what they mean structurally:
//! `parse` turns one payload into a `Message` that borrows from it (row values are slices
//! of the payload, never copies), and `RelationCache` keeps the latest Relation per OID and
//! checks row messages against it. It never interprets a value (that is `value`), never
//! maps a relation to a destination (that is `contract`) and never decides what to do
//! about a change (that is the pipeline).

mod cache;
#[cfg(test)]
mod capture_tests;
mod display;
#[cfg(feature = "testing")]
pub mod encode;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
mod message;
mod parse;
#[cfg(test)]
mod proptests;
pub mod relation;
#[cfg(test)]
mod tests;

pub use cache::{RelationCache, RelationChange, RelationError, TuplePart};
pub use display::{NamedMessage, SHOWN_VALUE_BYTES};
pub use message::{
    Begin, Columns, Commit, Datum, Delete, Insert, LogicalMessage, Message, OldKind, OldTuple,
    Origin, Truncate, Tuple, TypeMessage, Update, TUPLE_INLINE_COLUMNS,
};
pub use parse::parse;
pub use relation::{Relation, RelationColumn, ReplicaIdentity};
