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

impl ReplicaIdentity {
    /// The `relreplident` byte pgoutput sends for this setting.
    pub fn tag(self) -> u8 {
        match self {
            ReplicaIdentity::Default => b'd',
            ReplicaIdentity::Nothing => b'n',
            ReplicaIdentity::Full => b'f',
            ReplicaIdentity::Index => b'i',
        }
    }

    /// The SQL spelling (`ALTER TABLE ... REPLICA IDENTITY <this>`), lower case.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplicaIdentity::Default => "default",
            ReplicaIdentity::Nothing => "nothing",
            ReplicaIdentity::Full => "full",
            ReplicaIdentity::Index => "index",
        }
    }
}

impl Relation {
    /// `schema.table` as a reader would write it; pgoutput sends an empty namespace for
    /// `pg_catalog`, which is spelled out here so the name is never ambiguous.
    pub fn qualified_name(&self) -> String {
        let namespace = if self.namespace.is_empty() {
            "pg_catalog"
        } else {
            &self.namespace
        };
        format!("{namespace}.{}", self.name)
    }

    /// Index of the column called `name`.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// The columns flagged as part of the replica identity, with their positions.
    pub fn identity_columns(&self) -> impl Iterator<Item = (usize, &RelationColumn)> {
        self.columns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.in_replica_identity)
    }

    /// Whether `other` describes the same columns (names, types, modifiers, identity flags)
    /// and the same replica identity, whatever the table is called.
    pub fn same_shape(&self, other: &Relation) -> bool {
        self.replica_identity == other.replica_identity && self.columns == other.columns
    }
}
