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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pgoutput::message::{Datum, Delete, Insert, OldTuple, Update};
    use crate::pgoutput::relation::{RelationColumn, ReplicaIdentity};
    use crate::pgoutput::{encode, parse};
    use smallvec::smallvec;

    fn column(name: &str, key: bool) -> RelationColumn {
        RelationColumn {
            in_replica_identity: key,
            name: name.to_owned(),
            type_oid: 23,
            type_modifier: -1,
        }
    }

    fn users(columns: &[&str]) -> Relation {
        Relation {
            oid: 16384,
            namespace: "public".to_owned(),
            name: "users".to_owned(),
            replica_identity: ReplicaIdentity::Default,
            columns: columns
                .iter()
                .enumerate()
                .map(|(i, name)| column(name, i == 0))
                .collect(),
        }
    }

    fn nulls(count: usize) -> Tuple<'static> {
        std::iter::repeat_n(Datum::Null, count).collect()
    }

    fn insert(count: usize) -> Message<'static> {
        Message::Insert(Insert {
            relation_oid: 16384,
            new: nulls(count),
        })
    }

    #[test]
    fn apply_reports_added_unchanged_and_replaced() {
        let mut cache = RelationCache::new();
        assert_eq!(cache.apply(users(&["id", "name"])), RelationChange::Added);
        assert_eq!(
            cache.apply(users(&["id", "name"])),
            RelationChange::Unchanged
        );
        let change = cache.apply(users(&["id", "name", "email"]));
        assert!(change.is_shape_change());
        assert_eq!(
            change,
            RelationChange::Replaced {
                previous: users(&["id", "name"]),
                shape_changed: true
            }
        );
        assert_eq!(cache.get(16384), Some(&users(&["id", "name", "email"])));
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn rename_replaces_without_a_shape_change() {
        let mut cache = RelationCache::new();
        cache.apply(users(&["id"]));
        let mut renamed = users(&["id"]);
        renamed.name = "people".to_owned();
        let change = cache.apply(renamed);
        assert!(matches!(
            change,
            RelationChange::Replaced {
                shape_changed: false,
                ..
            }
        ));
        assert_eq!(cache.get(16384).map(|r| r.name.as_str()), Some("people"));
    }

    #[test]
    fn identity_setting_change_is_a_shape_change() {
        let mut cache = RelationCache::new();
        cache.apply(users(&["id"]));
        let mut full = users(&["id"]);
        full.replica_identity = ReplicaIdentity::Full;
        assert!(cache.apply(full).is_shape_change());
    }

    #[test]
    fn relation_replaced_mid_stream_with_added_column_accepts_only_the_new_width() {
        // Parsed from bytes so the whole path (parse, apply, check) is covered.
        let mut cache = RelationCache::new();
        for relation in [users(&["id", "name"]), users(&["id", "name", "email"])] {
            let bytes = encode::relation(&relation);
            let Ok(Message::Relation(parsed)) = parse(&bytes) else {
                panic!("relation did not parse")
            };
            cache.apply(parsed);
        }
        let new_width = encode::insert(16384, encode::row(&[Some("1"), Some("ann"), None]));
        let message = parse(&new_width).unwrap();
        assert_eq!(
            cache.check(&message).unwrap().map(|r| r.columns.len()),
            Some(3)
        );
        let old_width = encode::insert(16384, encode::row(&[Some("1"), Some("ann")]));
        let err = cache.check(&parse(&old_width).unwrap()).unwrap_err();
        assert_eq!(
            err,
            RelationError::ColumnCount {
                oid: 16384,
                relation: "public.users".to_owned(),
                part: TuplePart::New,
                expected: 3,
                actual: 2
            }
        );
        assert_eq!(
            err.to_string(),
            "new tuple of relation public.users (OID 16384) has 2 columns; its Relation message announced 3"
        );
    }

    #[test]
    fn more_columns_than_the_relation_is_refused_not_indexed() {
        let mut cache = RelationCache::new();
        cache.apply(users(&["id"]));
        assert!(matches!(
            cache.check(&insert(2)),
            Err(RelationError::ColumnCount {
                expected: 1,
                actual: 2,
                ..
            })
        ));
    }

    #[test]
    fn old_images_are_checked_too() {
        let mut cache = RelationCache::new();
        cache.apply(users(&["id", "name"]));
        let update = Message::Update(Update {
            relation_oid: 16384,
            old: Some(OldTuple {
                kind: OldKind::Key,
                tuple: nulls(3),
            }),
            new: nulls(2),
        });
        assert!(matches!(
            cache.check(&update),
            Err(RelationError::ColumnCount {
                part: TuplePart::Old(OldKind::Key),
                expected: 2,
                actual: 3,
                ..
            })
        ));
        let delete = Message::Delete(Delete {
            relation_oid: 16384,
            old: OldTuple {
                kind: OldKind::Row,
                tuple: nulls(1),
            },
        });
        let err = cache.check(&delete).unwrap_err();
        assert!(err
            .to_string()
            .starts_with("old row tuple of relation public.users"));
    }

    #[test]
    fn unknown_relation_in_any_row_or_truncate_message_is_a_protocol_error() {
        let cache = RelationCache::new();
        let update = Message::Update(Update {
            relation_oid: 16384,
            old: None,
            new: nulls(1),
        });
        let delete = Message::Delete(Delete {
            relation_oid: 16384,
            old: OldTuple {
                kind: OldKind::Key,
                tuple: nulls(1),
            },
        });
        for (message, name) in [
            (insert(1), "insert"),
            (update, "update"),
            (delete, "delete"),
        ] {
            assert_eq!(
                cache.check(&message),
                Err(RelationError::UnknownRelation {
                    oid: 16384,
                    message: name
                })
            );
        }
        let mut cache = RelationCache::new();
        cache.apply(users(&["id"]));
        let truncate = Truncate {
            cascade: false,
            restart_identity: false,
            relation_oids: smallvec![16384, 99],
        };
        let err = cache
            .check(&Message::Truncate(truncate.clone()))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "truncate names relation OID 99, but no Relation message announced it in this replication session"
        );
        cache.apply(Relation {
            oid: 99,
            ..users(&[])
        });
        let names: Vec<_> = cache
            .truncated(&truncate)
            .unwrap()
            .iter()
            .map(|r| r.oid)
            .collect();
        assert_eq!(names, [16384, 99]);
    }

    #[test]
    fn clear_forgets_relations_of_the_previous_session() {
        let mut cache = RelationCache::new();
        cache.apply(users(&["id"]));
        cache.clear();
        assert!(cache.is_empty());
        assert!(matches!(
            cache.check(&insert(1)),
            Err(RelationError::UnknownRelation { .. })
        ));
    }

    #[test]
    fn iteration_is_in_oid_order() {
        let mut cache = RelationCache::new();
        for oid in [30, 10, 20] {
            cache.apply(Relation {
                oid,
                ..users(&["id"])
            });
        }
        let oids: Vec<u32> = cache.iter().map(|r| r.oid).collect();
        assert_eq!(oids, [10, 20, 30]);
        assert_eq!(cache.remove(20).map(|r| r.oid), Some(20));
        assert_eq!(cache.len(), 2);
    }
}
