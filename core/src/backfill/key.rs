//! A row's primary key as both sides of the online copy see it: a chunk's COPY row and a
//! streamed change. Both are the key columns' text output (COPY text format un-escaped, and
//! pgoutput's `t` datums) under the same pinned session settings, so one key compares equal
//! whichever side it came from (docs/online-copy.md, "Reconciling a chunk with the stream").
//!
//! Key columns are found by name in each relation's column list: a chunk reads the table as
//! the catalog described it, the stream announces each relation (a partition among them) with
//! its own Relation message, and the columns' positions may differ.

use super::window::Touch;
use crate::copy::CopyRow;
use crate::pgoutput::{Datum, Message, RelationColumn, Tuple};
use smallvec::SmallVec;

/// A primary key value: the key columns' text, in key order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RowKey(pub SmallVec<[Vec<u8>; 2]>);

/// The primary key's columns, by name, in key order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyColumns {
    pub names: Vec<String>,
}

impl KeyColumns {
    /// Where each key column is in `columns`; `None` when one is missing (a column list
    /// that leaves a key column out cannot be copied by key) or there is no key.
    pub fn positions(&self, columns: &[RelationColumn]) -> Option<Vec<usize>> {
        if self.names.is_empty() {
            return None;
        }
        self.names
            .iter()
            .map(|name| columns.iter().position(|c| &c.name == name))
            .collect()
    }
}

/// The key of a chunk's COPY row; `None` if a key field is NULL or missing (a primary
/// key never is).
pub fn copy_row_key(row: &CopyRow, positions: &[usize]) -> Option<RowKey> {
    positions
        .iter()
        .map(|&p| row.field(p).flatten().map(<[u8]>::to_vec))
        .collect::<Option<SmallVec<_>>>()
        .map(RowKey)
}

/// The key a tuple carries; `None` when a key column is not there as text (NULL, an
/// unchanged TOASTed value pgoutput did not send, or binary).
fn tuple_key(tuple: &Tuple<'_>, positions: &[usize]) -> Option<RowKey> {
    positions
        .iter()
        .map(|&p| match tuple.get(p) {
            Some(Datum::Text(bytes)) => Some(bytes.to_vec()),
            _ => None,
        })
        .collect::<Option<SmallVec<_>>>()
        .map(RowKey)
}

/// The keys a change of the copied table touches: an insert's new key, an update's new key
/// and (when the key changed) its old one, a delete's old key. A key the change does not
/// carry as text is [`Touch::UnknownKey`]: an update whose unchanged key column is a TOASTed
/// value pgoutput did not send, for one.
pub fn touches(message: &Message<'_>, positions: &[usize]) -> SmallVec<[Touch<RowKey>; 2]> {
    let mut out = SmallVec::new();
    let mut push = |key: Option<RowKey>| {
        out.push(match key {
            Some(key) => Touch::Key(key),
            None => Touch::UnknownKey,
        })
    };
    match message {
        Message::Insert(insert) => push(tuple_key(&insert.new, positions)),
        Message::Update(update) => {
            let old = update.old.as_ref().map(|o| tuple_key(&o.tuple, positions));
            match (tuple_key(&update.new, positions), old) {
                (Some(new), Some(Some(old))) if old != new => {
                    push(Some(new));
                    push(Some(old));
                }
                (Some(new), _) => push(Some(new)),
                // The new image lacks the key as text; a whole old row (REPLICA IDENTITY
                // FULL) still names it.
                (None, Some(old)) => push(old),
                (None, None) => push(None),
            }
        }
        Message::Delete(delete) => push(tuple_key(&delete.old.tuple, positions)),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::copy::encode_row;
    use crate::pgoutput::{Delete, Insert, OldKind, OldTuple, Update};
    use proptest::prelude::*;

    fn column(name: &str) -> RelationColumn {
        RelationColumn {
            in_replica_identity: false,
            name: name.into(),
            type_oid: 25,
            type_modifier: -1,
        }
    }

    fn key(parts: &[&str]) -> RowKey {
        RowKey(parts.iter().map(|p| p.as_bytes().to_vec()).collect())
    }

    #[test]
    fn key_columns_are_found_by_name_wherever_they_are() {
        let keys = KeyColumns {
            names: vec!["region".into(), "id".into()],
        };
        let table = [column("id"), column("name"), column("region")];
        assert_eq!(keys.positions(&table), Some(vec![2, 0]));
        let partition = [column("region"), column("id"), column("name")];
        assert_eq!(keys.positions(&partition), Some(vec![0, 1]));
        assert_eq!(keys.positions(&[column("id")]), None, "region left out");
        assert_eq!(KeyColumns { names: vec![] }.positions(&table), None);
    }

    #[test]
    fn each_change_touches_the_keys_it_writes_or_removes() {
        let positions = [0usize];
        let t = |s: &'static str| Datum::Text(s.as_bytes());
        let insert = Message::Insert(Insert {
            relation_oid: 1,
            new: [t("7"), t("a")].into_iter().collect(),
        });
        assert_eq!(
            touches(&insert, &positions).to_vec(),
            vec![Touch::Key(key(&["7"]))]
        );
        let moved = Message::Update(Update {
            relation_oid: 1,
            old: Some(OldTuple {
                kind: OldKind::Key,
                tuple: [t("7"), Datum::Null].into_iter().collect(),
            }),
            new: [t("8"), t("a")].into_iter().collect(),
        });
        assert_eq!(
            touches(&moved, &positions).to_vec(),
            vec![Touch::Key(key(&["8"])), Touch::Key(key(&["7"]))]
        );
        let in_place = Message::Update(Update {
            relation_oid: 1,
            old: None,
            new: [t("8"), t("b")].into_iter().collect(),
        });
        assert_eq!(
            touches(&in_place, &positions).to_vec(),
            vec![Touch::Key(key(&["8"]))]
        );
        let toasted_key = Message::Update(Update {
            relation_oid: 1,
            old: None,
            new: [Datum::Unchanged, t("b")].into_iter().collect(),
        });
        assert_eq!(
            touches(&toasted_key, &positions).to_vec(),
            vec![Touch::UnknownKey]
        );
        let full_old = Message::Update(Update {
            relation_oid: 1,
            old: Some(OldTuple {
                kind: OldKind::Row,
                tuple: [t("9"), t("a")].into_iter().collect(),
            }),
            new: [Datum::Unchanged, t("b")].into_iter().collect(),
        });
        assert_eq!(
            touches(&full_old, &positions).to_vec(),
            vec![Touch::Key(key(&["9"]))]
        );
        let delete = Message::Delete(Delete {
            relation_oid: 1,
            old: OldTuple {
                kind: OldKind::Key,
                tuple: [t("9"), Datum::Null].into_iter().collect(),
            },
        });
        assert_eq!(
            touches(&delete, &positions).to_vec(),
            vec![Touch::Key(key(&["9"]))]
        );
    }

    proptest! {
        /// A key the stream sends as text and the same key in a COPY text row compare equal,
        /// whatever bytes it holds (tabs, newlines, backslashes, non-UTF-8).
        #[test]
        fn a_copy_row_and_a_streamed_tuple_give_the_same_key(
            fields in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 1..5),
            pick in proptest::collection::vec(any::<proptest::sample::Index>(), 1..3),
        ) {
            let positions: Vec<usize> = pick.iter().map(|i| i.index(fields.len())).collect();
            let borrowed: Vec<Option<&[u8]>> = fields.iter().map(|f| Some(f.as_slice())).collect();
            let line = encode_row(&borrowed);
            let mut row = CopyRow::new();
            row.parse(&line, fields.len()).unwrap();
            let tuple: Tuple<'_> = fields.iter().map(|f| Datum::Text(f)).collect();
            let insert = Message::Insert(Insert { relation_oid: 1, new: tuple });
            let from_copy = copy_row_key(&row, &positions).unwrap();
            prop_assert_eq!(touches(&insert, &positions).to_vec(), vec![Touch::Key(from_copy)]);
        }
    }
}
