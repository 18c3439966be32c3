//! Retraction: emptying a Feldera table after a PostgreSQL TRUNCATE, and deleting the keys a
//! re-snapshot no longer has, when slotline does not hold the key set (docs/retraction.md).
//!
//! Owns the pure pieces: whether a table's keys can be retracted exactly (`plan`), their
//! values and encodings (`value`), SQL spellings (`literal`), the questions asked of Feldera
//! and PostgreSQL (`sql`) and the reading of their answers (`page`). Never performs I/O,
//! never decides when to ask or to delete, and never takes an empty or unreadable answer as
//! proof that nothing needs retracting: the pipeline drives the scans, the deletes and the
//! final count.

pub mod literal;
pub mod page;
pub mod plan;
pub mod sql;
pub mod value;

pub use page::{leftovers, read_count, read_keys, ReadError};
pub use plan::{
    plan_keys, plan_leftovers, Key, KeyColumn, KeyPlan, LeftoverPlan, PgKeyColumn, Purpose,
    RetractRefusal,
};
pub use sql::{count_query, existence_query, key_alias, probe_query, scan_query, COUNT_ALIAS};
pub use value::{KeyKind, KeyValue, Ymd};
