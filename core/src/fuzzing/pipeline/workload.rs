//! What the fake PostgreSQL's transactions change, and every key's value history, which is
//! what the harness compares Feldera's tables with. Users are inserted with fresh ids and
//! then renamed, re-keyed and deleted; items live on a key space of four skus that are
//! inserted, overwritten and deleted again and again, so a change that lands late or twice
//! shows as a wrong value rather than as an extra row. A TRUNCATE empties one table or
//! both. Keys whose changes never reached a slot (committed while none existed, or not yet
//! confirmed when it was dropped or the server was restored) are `lost`: what Feldera holds
//! for them is outside the promise until a later change of the key is. The history is
//! PostgreSQL's; what of each change the stream carries is the publication's
//! (`publication`), and so is what the oracles compare Feldera with.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::pg::{ITEMS, USERS};
use super::publication::Publication;
use crate::pgoutput::encode;
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
    /// TRUNCATE of users (bits 4-5 = 0), items (1) or both (2, 3).
    Truncate,
}

impl Change {
    fn of(byte: u8) -> Change {
        match byte & 7 {
            1 => Change::UpsertItem,
            6 => Change::DeleteItem,
            2 => Change::UpdateUser,
            3 => Change::UpdateUserKey,
            4 => Change::DeleteUser,
            7 => Change::Truncate,
            _ => Change::InsertUser,
        }
    }
}

/// What one change writes: the relations its pgoutput message names, the message, the
/// texts (each with its table) Feldera must hold once its commit is acknowledged, and the
/// tables it truncates.
#[derive(Debug)]
pub(super) struct Written {
    pub(super) relations: Vec<u32>,
    pub(super) payload: Vec<u8>,
    pub(super) markers: Vec<(&'static str, String)>,
    pub(super) truncated: Vec<&'static str>,
}

impl Written {
    fn one(relation: u32, payload: Vec<u8>, table: &'static str, marker: String) -> Written {
        Written {
            relations: vec![relation],
            payload,
            markers: vec![(table, marker)],
            truncated: Vec::new(),
        }
    }
}

/// See the module docs.
#[derive(Debug)]
pub(super) struct Workload {
    live_users: Vec<u64>,
    /// The quantity of each sku that exists.
    items: BTreeMap<usize, u64>,
    /// Users and skus that existed when the current transaction began.
    at_begin: (Vec<u64>, Vec<usize>),
    /// Keys whose Feldera row is outside the promise while no change of theirs ending
    /// after this position is covered (see the module docs).
    pub(super) lost: BTreeMap<Key, Lsn>,
    /// Every change of every key, in commit order.
    pub(super) history: BTreeMap<Key, Vec<Version>>,
    /// The keys each transaction changed, by its end.
    changed: BTreeMap<Lsn, Vec<Key>>,
    next_user: u64,
    next_change: u64,
    /// What the publication publishes: which changes reach the stream, and how.
    pub(super) publication: Publication,
}

impl Default for Workload {
    fn default() -> Workload {
        Workload {
            live_users: Vec::new(),
            items: BTreeMap::new(),
            at_begin: (Vec::new(), Vec::new()),
            lost: BTreeMap::new(),
            history: BTreeMap::new(),
            changed: BTreeMap::new(),
            next_user: 1,
            next_change: 1,
            publication: Publication::default(),
        }
    }
}

impl Workload {
    /// Rows that exist before the run (the snapshot phase's): users `1..=users` and skus
    /// `s0..` up to `skus`, as if committed at `at`.
    pub(super) fn seed(&mut self, users: u64, skus: usize, at: Lsn) {
        for _ in 0..users {
            let n = self.next_change;
            self.next_change += 1;
            let id = self.next_user;
            self.next_user += 1;
            self.live_users.push(id);
            let row = json!({"id": id, "name": self.publication.name(n)});
            self.record("users", json!(id), at, Some(row));
        }
        for slot in 0..skus.min(SKUS) {
            let n = self.next_change;
            self.next_change += 1;
            let qty = self.publication.quantity(n);
            self.items.insert(slot, qty);
            let sku = format!("s{slot}");
            self.record(
                "items",
                json!(sku),
                at,
                Some(json!({"sku": sku, "qty": qty})),
            );
        }
    }

    /// One past the highest heap ordinal a table's rows ever had (users by id, items by sku
    /// number): where its heap ends.
    pub(super) fn next_ordinal(&self, table: &str) -> u64 {
        match table {
            "users" => self.next_user,
            _ => SKUS as u64,
        }
    }

    /// A transaction begins: a TRUNCATE in it must delete what existed before it.
    pub(super) fn begin(&mut self) {
        self.at_begin = (
            self.live_users.clone(),
            self.items.keys().copied().collect(),
        );
    }

    /// One change (see `Written`). Its effect is added to `history` at the transaction's
    /// `end`; what of it is published is the publication's (`Publication::message`).
    pub(super) fn change(&mut self, byte: u8, end: Lsn) -> Written {
        let n = self.next_change;
        self.next_change += 1;
        let name = self.publication.name(n);
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
        // The old row of a change is given by its key alone: the default replica identity
        // logs no more of it, and that is what PostgreSQL evaluates the filter on (the
        // filters name only the key).
        match kind {
            Change::UpsertItem => {
                let slot = chosen % SKUS;
                let sku = format!("s{slot}");
                let qty = self.publication.quantity(n);
                let new = json!({"sku": sku, "qty": qty});
                let old = self.items.insert(slot, qty).map(|_| json!({ "sku": sku }));
                self.record("items", json!(sku), end, Some(new.clone()));
                self.publish("items", old.as_ref(), Some(&new))
            }
            Change::DeleteItem => {
                let slot = chosen % SKUS;
                self.items.remove(&slot);
                let sku = format!("s{slot}");
                self.record("items", json!(sku), end, None);
                self.publish("items", Some(&json!({ "sku": sku })), None)
            }
            Change::UpdateUser => {
                let id = self.live_users[index];
                let new = json!({"id": id, "name": name});
                self.record("users", json!(id), end, Some(new.clone()));
                self.publish("users", Some(&json!({ "id": id })), Some(&new))
            }
            Change::UpdateUserKey => {
                let old = self.live_users[index];
                let new = self.next_user;
                self.next_user += 1;
                self.live_users[index] = new;
                self.record("users", json!(old), end, None);
                let row = json!({"id": new, "name": name});
                self.record("users", json!(new), end, Some(row.clone()));
                self.publish("users", Some(&json!({ "id": old })), Some(&row))
            }
            Change::DeleteUser => {
                let id = self.live_users.remove(index);
                self.record("users", json!(id), end, None);
                self.publish("users", Some(&json!({ "id": id })), None)
            }
            Change::InsertUser => {
                let id = self.next_user;
                self.next_user += 1;
                self.live_users.push(id);
                let row = json!({"id": id, "name": name});
                self.record("users", json!(id), end, Some(row.clone()));
                self.publish("users", None, Some(&row))
            }
            Change::Truncate => self.truncate(chosen, end),
        }
    }

    /// What one row change of `table` writes to the stream: the publication's message and
    /// marker, or nothing (no message, no Relation, no marker) when it publishes none.
    fn publish(&self, table: &'static str, old: Option<&Value>, new: Option<&Value>) -> Written {
        let oid = if table == "users" { USERS } else { ITEMS };
        match self.publication.message(table, old, new) {
            Some((payload, marker)) => Written::one(oid, payload, table, marker),
            None => Written {
                relations: Vec::new(),
                payload: Vec::new(),
                markers: Vec::new(),
                truncated: Vec::new(),
            },
        }
    }

    /// A TRUNCATE (`chosen` picks the tables): every row goes. Feldera must then hold a
    /// durable delete of every key that existed when the transaction began and whose row
    /// it was promised (not `lost`, and inside the publication's filter: Feldera never held
    /// another); rows the transaction wrote before the TRUNCATE may never have left
    /// slotline. A TRUNCATE is published whatever the filter.
    fn truncate(&mut self, chosen: usize, end: Lsn) -> Written {
        let (users, items) = match chosen & 3 {
            0 => (true, false),
            1 => (false, true),
            _ => (true, true),
        };
        let mut written = Written {
            relations: Vec::new(),
            payload: Vec::new(),
            markers: Vec::new(),
            truncated: Vec::new(),
        };
        if users {
            for id in std::mem::take(&mut self.live_users) {
                self.record("users", json!(id), end, None);
            }
            for id in self.at_begin.0.clone() {
                let key = ("users", json!(id).to_string());
                if !self.is_lost(&key, Some(end)) && self.publication.publishes_key(&key) {
                    let marker = format!("{{\"delete\":{{\"id\":{id}}}}}");
                    written.markers.push(("users", marker));
                }
            }
            written.relations.push(USERS);
            written.truncated.push("users");
        }
        if items {
            for slot in std::mem::take(&mut self.items).into_keys() {
                self.record("items", json!(format!("s{slot}")), end, None);
            }
            for slot in self.at_begin.1.clone() {
                let sku = format!("s{slot}");
                let key = ("items", json!(sku).to_string());
                if !self.is_lost(&key, Some(end)) && self.publication.publishes_key(&key) {
                    let marker = format!("{{\"delete\":{{\"sku\":\"{sku}\"");
                    written.markers.push(("items", marker));
                }
            }
            written.relations.push(ITEMS);
            written.truncated.push("items");
        }
        written.payload = encode::truncate(&written.relations, false, false);
        written
    }

    /// Whether Feldera's row of `key` is outside the promise as of its last change ending
    /// before `before` (its last change of all with `None`).
    pub(super) fn is_lost(&self, key: &Key, before: Option<Lsn>) -> bool {
        let last = self.history.get(key).and_then(|versions| {
            versions
                .iter()
                .rev()
                .map(|(end, _)| *end)
                .find(|end| before.is_none_or(|b| *end < b))
        });
        self.lost
            .get(key)
            .is_some_and(|until| last.is_none_or(|end| end <= *until))
    }

    /// The keys changed by transactions ending after `after` (all when `None`) and up to
    /// `upto` never reached a slot: their Feldera rows are outside the promise until a
    /// change after `until`.
    pub(super) fn lose(&mut self, after: Option<Lsn>, upto: Lsn, until: Lsn) {
        for key in self.changed_between(after, upto) {
            let at = self.lost.entry(key).or_insert(until);
            *at = (*at).max(until);
        }
    }

    /// The server is restored to `at`: every change after it is gone from PostgreSQL (its
    /// keys' Feldera rows are outside the promise), and what exists is what existed then.
    pub(super) fn restore(&mut self, at: Lsn) {
        self.lose(Some(at), Lsn(u64::MAX), at);
        let _ = self.changed.split_off(&Lsn(at.0 + 1));
        for versions in self.history.values_mut() {
            versions.retain(|(end, _)| *end <= at);
        }
        self.live_users.clear();
        self.items.clear();
        for ((table, key), versions) in &self.history {
            let Some((_, Some(row))) = versions.last() else {
                continue;
            };
            if *table == "users" {
                self.live_users.extend(key.parse::<u64>().ok());
            } else if let Some(slot) = key.trim_matches('"').strip_prefix('s') {
                let qty = row.get("qty").and_then(Value::as_u64).unwrap_or(0);
                if let Ok(slot) = slot.parse() {
                    self.items.insert(slot, qty);
                }
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
