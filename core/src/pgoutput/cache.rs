//! The relation cache: the latest Relation message per relation OID, and the checks that
//! tie row messages to it.
//!
//! It owns the rule "a tuple has exactly as many columns as its relation, and its relation
//! was announced first". It never decides what a shape change means for the destination
//! (that is the contract's job): it only reports that one happened.
//!
//! pgoutput announces each relation once per walsender session, before its first row, and
//! again whenever it changes (ALTER TABLE). Call `clear` when a new replication session
//! starts so a relation that was never re-announced cannot be used with a stale shape.

use std::collections::BTreeMap;
use std::fmt;

use super::message::{Message, OldKind, Truncate, Tuple};
use super::relation::Relation;

/// Relations by OID. A `BTreeMap` so iteration (and anything printed from it) is ordered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RelationCache {
    relations: BTreeMap<u32, Relation>,
}

/// What storing a Relation message did to the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RelationChange {
    /// The OID was not known.
    Added,
    /// Identical to the cached relation (pgoutput re-sends relations freely).
    Unchanged,
    /// The cached relation was replaced. `shape_changed` is false for a rename only (same
    /// columns, types, identity flags and replica identity).
    Replaced {
        previous: Relation,
        shape_changed: bool,
    },
}

impl RelationChange {
    /// Whether tuples of this relation now have a different layout than before.
    pub fn is_shape_change(&self) -> bool {
        matches!(
            self,
            RelationChange::Replaced {
                shape_changed: true,
                ..
            }
        )
    }
}

/// Which tuple of a row message a check was about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TuplePart {
    /// `N` of an Insert or Update.
    New,
    /// `K` or `O` of an Update or Delete.
    Old(OldKind),
}

impl fmt::Display for TuplePart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TuplePart::New => "new tuple",
            TuplePart::Old(OldKind::Key) => "old key tuple",
            TuplePart::Old(OldKind::Row) => "old row tuple",
        })
    }
}

/// A row or truncate message that contradicts the relations announced so far: a protocol
/// violation (the stream cannot be applied), never something to skip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RelationError {
    /// A message named an OID no Relation message announced in this session.
    UnknownRelation { oid: u32, message: &'static str },
    /// A tuple's column count differs from its relation's.
    ColumnCount {
        oid: u32,
        relation: String,
        part: TuplePart,
        expected: usize,
        actual: usize,
    },
}

impl fmt::Display for RelationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RelationError::UnknownRelation { oid, message } => write!(
                f,
                "{message} names relation OID {oid}, but no Relation message announced it in this replication session"
            ),
            RelationError::ColumnCount {
                oid,
                relation,
                part,
                expected,
                actual,
            } => write!(
                f,
                "{part} of relation {relation} (OID {oid}) has {actual} columns; its Relation message announced {expected}"
            ),
        }
    }
}

impl std::error::Error for RelationError {}

impl RelationCache {
    pub fn new() -> Self {
        RelationCache::default()
    }

    /// Stores a Relation message, replacing any earlier one for the same OID.
    pub fn apply(&mut self, relation: Relation) -> RelationChange {
        let shape_changed = match self.relations.get(&relation.oid) {
            None => None,
            Some(cached) if *cached == relation => return RelationChange::Unchanged,
            Some(cached) => Some(!cached.same_shape(&relation)),
        };
        match (self.relations.insert(relation.oid, relation), shape_changed) {
            (Some(previous), Some(shape_changed)) => RelationChange::Replaced {
                previous,
                shape_changed,
            },
            _ => RelationChange::Added,
        }
    }

    pub fn get(&self, oid: u32) -> Option<&Relation> {
        self.relations.get(&oid)
    }

    /// The relation `message` (a short description like "insert") refers to, or the
    /// protocol error of an unannounced OID.
    pub fn require(&self, oid: u32, message: &'static str) -> Result<&Relation, RelationError> {
        self.relations
            .get(&oid)
            .ok_or(RelationError::UnknownRelation { oid, message })
    }

    /// Checks that `tuple` has exactly the columns of relation `oid`.
    pub fn check_tuple(
        &self,
        oid: u32,
        tuple: &Tuple<'_>,
        part: TuplePart,
        message: &'static str,
    ) -> Result<&Relation, RelationError> {
        let relation = self.require(oid, message)?;
        if tuple.len() != relation.columns.len() {
            return Err(RelationError::ColumnCount {
                oid,
                relation: relation.qualified_name(),
                part,
                expected: relation.columns.len(),
                actual: tuple.len(),
            });
        }
        Ok(relation)
    }

    /// Validates a message against the cache. For a row message (Insert, Update, Delete)
    /// returns its relation after checking every tuple's column count; for a Truncate
    /// checks that every OID is known and returns `None`; other messages pass unchecked.
    /// A Relation message is not stored by this call: give it to `apply`.
    pub fn check(&self, message: &Message<'_>) -> Result<Option<&Relation>, RelationError> {
        match message {
            Message::Insert(m) => self
                .check_tuple(m.relation_oid, &m.new, TuplePart::New, "insert")
                .map(Some),
            Message::Update(m) => {
                if let Some(old) = &m.old {
                    self.check_tuple(
                        m.relation_oid,
                        &old.tuple,
                        TuplePart::Old(old.kind),
                        "update",
                    )?;
                }
                self.check_tuple(m.relation_oid, &m.new, TuplePart::New, "update")
                    .map(Some)
            }
            Message::Delete(m) => self
                .check_tuple(
                    m.relation_oid,
                    &m.old.tuple,
                    TuplePart::Old(m.old.kind),
                    "delete",
                )
                .map(Some),
            Message::Truncate(m) => self.truncated(m).map(|_| None),
            Message::Begin(_)
            | Message::Commit(_)
            | Message::Origin(_)
            | Message::Relation(_)
            | Message::Type(_)
            | Message::Logical(_) => Ok(None),
        }
    }

    /// The relations a Truncate names, in message order.
    pub fn truncated(&self, truncate: &Truncate) -> Result<Vec<&Relation>, RelationError> {
        truncate
            .relation_oids
            .iter()
            .map(|oid| self.require(*oid, "truncate"))
            .collect()
    }

    pub fn remove(&mut self, oid: u32) -> Option<Relation> {
        self.relations.remove(&oid)
    }

    /// Forgets every relation (a new replication session re-announces what it uses).
    pub fn clear(&mut self) {
        self.relations.clear();
    }

    pub fn len(&self) -> usize {
        self.relations.len()
    }

    pub fn is_empty(&self) -> bool {
        self.relations.is_empty()
    }

    /// Relations in OID order.
    pub fn iter(&self) -> impl Iterator<Item = &Relation> {
        self.relations.values()
    }
}
