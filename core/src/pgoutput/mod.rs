//! pgoutput (logical replication protocol 1): message parser and relation cache.

pub mod relation;

pub use relation::{Relation, RelationColumn, ReplicaIdentity};
