//! Relations as pgoutput describes them, and the cache that maps relation OIDs to them.
//!
//! The struct fields below are an interface: `contract::mapping` reads them.

/// `REPLICA IDENTITY` of a relation: what the old image of an UPDATE or DELETE carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReplicaIdentity {
    /// `d`: the primary key columns (or nothing when there is no primary key).
    Default,
    /// `n`: nothing.
    Nothing,
    /// `f`: every column.
    Full,
    /// `i`: the columns of a chosen unique index.
    Index,
}

/// One column of a Relation message.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RelationColumn {
    /// Column flag 1: part of the replica identity (not "primary key"; under FULL every
    /// column has it).
    pub in_replica_identity: bool,
    pub name: String,
    pub type_oid: u32,
    pub type_modifier: i32,
}

/// A Relation message: a table's shape as of this point in the stream.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Relation {
    pub oid: u32,
    /// Schema name (pgoutput sends an empty string for `pg_catalog`).
    pub namespace: String,
    pub name: String,
    pub replica_identity: ReplicaIdentity,
    pub columns: Vec<RelationColumn>,
}
