//! What the fake PostgreSQL's transactions change, and every key's value history, which is
//! what the harness compares Feldera's tables with. Users are inserted with fresh ids and
//! then renamed, re-keyed and deleted; items live on a key space of four skus that are
//! inserted, overwritten and deleted again and again, so a change that lands late or twice
//! shows as a wrong value rather than as an extra row.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::pg::{ITEMS, USERS};
use crate::pgoutput::{encode, OldKind};
use crate::Lsn;

/// How many skus the items table ever holds: small, so keys are written again and again.
const SKUS: usize = 4;

/// A row of a table as Feldera shows it: the table's URL segment and the key's JSON text.
pub(super) type Key = (&'static str, String);

/// One change of a key: the end of its transaction and the row after it (`None`: deleted).
pub(super) type Version = (Lsn, Option<Value>);

/// What one change of a transaction does (the low three bits of its byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Change {
    InsertUser,
    /// Inserts the chosen sku, or overwrites its quantity when it exists.
    UpsertItem,
    /// Deletes the chosen sku, or inserts it when it does not exist.
    DeleteItem,
    /// A new name for an existing user (the key stays).
    UpdateUser,
    /// An existing user gets a new id: PostgreSQL sends the old key with the update.
    UpdateUserKey,
    DeleteUser,
}

impl Change {
    fn of(byte: u8) -> Change {
        match byte & 7 {
            1 => Change::UpsertItem,
            6 => Change::DeleteItem,
            2 => Change::UpdateUser,
            3 => Change::UpdateUserKey,
            4 => Change::DeleteUser,
            _ => Change::InsertUser,
        }
    }
}

/// See the module docs.
#[derive(Debug)]
pub(super) struct Workload {
    live_users: Vec<u64>,
    /// The quantity of each sku that exists.
    items: BTreeMap<usize, u64>,
    /// Every change of every key, in commit order.
    pub(super) history: BTreeMap<Key, Vec<Version>>,
    /// The keys each transaction changed, by its end.
    changed: BTreeMap<Lsn, Vec<Key>>,
    next_user: u64,
    next_change: u64,
}

impl Default for Workload {
    fn default() -> Workload {
        Workload {
            live_users: Vec::new(),
            items: BTreeMap::new(),
            history: BTreeMap::new(),
            changed: BTreeMap::new(),
            next_user: 1,
            next_change: 1,
        }
    }
}

impl Workload {
    /// One change: its relation, its pgoutput message, and the text that shows it in an
    /// ingress body. Its effect is added to `history` at the transaction's `end`.
    pub(super) fn change(&mut self, byte: u8, end: Lsn) -> (u32, Vec<u8>, String) {
        let n = self.next_change;
        self.next_change += 1;
        let name = format!("r{n}");
        let chosen = usize::from(byte >> 4);
        let kind = match Change::of(byte) {
            Change::UpdateUser | Change::UpdateUserKey | Change::DeleteUser
                if self.live_users.is_empty() =>
            {
                Change::InsertUser
            }
            Change::DeleteItem if !self.items.contains_key(&(chosen % SKUS)) => Change::UpsertItem,
            kind => kind,
        };
        let index = chosen % self.live_users.len().max(1);
        match kind {
            Change::UpsertItem => {
                let slot = chosen % SKUS;
                let (sku, qty) = (format!("s{slot}"), n.to_string());
                let row = encode::row(&[Some(&sku), Some(&qty)]);
                let payload = if self.items.insert(slot, n).is_some() {
                    encode::update(ITEMS, None, row)
                } else {
                    encode::insert(ITEMS, row)
                };
                self.record(
                    "items",
                    json!(sku),
                    end,
                    Some(json!({"sku": sku, "qty": n})),
                );
                (ITEMS, payload, format!("{{\"sku\":\"{sku}\",\"qty\":{n}}}"))
            }
            Change::DeleteItem => {
                let slot = chosen % SKUS;
                self.items.remove(&slot);
                let sku = format!("s{slot}");
                let key = encode::row(&[Some(&sku), None]);
                self.record("items", json!(sku), end, None);
                let payload = encode::delete(ITEMS, OldKind::Key, key);
                (ITEMS, payload, format!("{{\"delete\":{{\"sku\":\"{sku}\""))
            }
            Change::UpdateUser => {
                let id = self.live_users[index];
                self.record(
                    "users",
                    json!(id),
                    end,
                    Some(json!({"id": id, "name": name})),
                );
                let id = id.to_string();
                let row = encode::row(&[Some(&id), Some(&name)]);
                (
                    USERS,
                    encode::update(USERS, None, row),
                    format!("\"{name}\""),
                )
            }
            Change::UpdateUserKey => {
                let old = self.live_users[index];
                let new = self.next_user;
                self.next_user += 1;
                self.live_users[index] = new;
                self.record("users", json!(old), end, None);
                self.record(
                    "users",
                    json!(new),
                    end,
                    Some(json!({"id": new, "name": name})),
                );
                let (old, new) = (old.to_string(), new.to_string());
                let old_key = encode::row(&[Some(&old), None]);
                let row = encode::row(&[Some(&new), Some(&name)]);
                let payload = encode::update(USERS, Some((OldKind::Key, old_key)), row);
                (USERS, payload, format!("\"{name}\""))
            }
            Change::DeleteUser => {
                let id = self.live_users.remove(index);
                self.record("users", json!(id), end, None);
                let key = id.to_string();
                let payload = encode::delete(USERS, OldKind::Key, encode::row(&[Some(&key), None]));
                (USERS, payload, format!("{{\"delete\":{{\"id\":{id}}}}}"))
            }
            Change::InsertUser => {
                let id = self.next_user;
                self.next_user += 1;
                self.live_users.push(id);
                self.record(
                    "users",
                    json!(id),
                    end,
                    Some(json!({"id": id, "name": name})),
                );
                let id = id.to_string();
                let row = encode::row(&[Some(&id), Some(&name)]);
                (USERS, encode::insert(USERS, row), format!("\"{name}\""))
            }
        }
    }

    fn record(&mut self, table: &'static str, key: Value, end: Lsn, row: Option<Value>) {
        let key = (table, key.to_string());
        self.changed.entry(end).or_default().push(key.clone());
        self.history.entry(key).or_default().push((end, row));
    }

    /// The keys of transactions ending after `after` (all when `None`) and up to `upto`.
    pub(super) fn changed_between(&self, after: Option<Lsn>, upto: Lsn) -> Vec<Key> {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let from = after.map_or(Unbounded, Excluded);
        self.changed
            .range((from, Included(upto)))
            .flat_map(|(_, keys)| keys.iter().cloned())
            .collect()
    }

    /// The tables as PostgreSQL holds them now: the last version of every key that exists.
    pub(super) fn tables(&self) -> BTreeMap<Key, Value> {
        self.history
            .iter()
            .filter_map(|(key, versions)| {
                let row = versions.last()?.1.clone()?;
                Some((key.clone(), row))
            })
            .collect()
    }
}
