//! What the fake PostgreSQL's publication publishes of its two tables (issue 31;
//! docs/snapshot.md, "What the publication publishes"): for each, optionally a row filter on
//! its key column and optionally a column list that leaves out its other column. The fake
//! applies both as PostgreSQL does, and checks that what the pipeline asks applies them too:
//!
//! - `pg_publication_tables` answers each table's published columns (a JSON array, `NULL`
//!   for every column) and its filter as PostgreSQL prints it (`NULL` for every row).
//! - The stream (`message`): a Relation message lists only the published columns, and so
//!   does every tuple. An INSERT of a row outside the filter is not published, nor is a
//!   DELETE of one; an UPDATE is evaluated on the old and the new row: published as an
//!   UPDATE when both are inside, as an INSERT when only the new one is, as a DELETE when
//!   only the old one is, not at all when neither is. (PostgreSQL needs the filter's
//!   columns in the replica identity for UPDATE and DELETE: a filter on the key holds that,
//!   and makes whether a row is published a property of its key.)
//! - The copy (`check_copy`, `copy_line`): the COPY must select exactly the published
//!   columns, in the table's order, and carry exactly the filter; a COPY that does not is a
//!   harness failure, never answered. The rows answered are the snapshot's rows inside the
//!   filter, with only those columns.
//! - The leftover question (`check_existence`) must carry the filter too, and is answered
//!   from the rows inside it.
//! - The oracles compare Feldera with what the publication publishes (`view`, `view_rows`):
//!   only rows inside the filter, a left-out column absent (Feldera stores NULL for a
//!   nullable column a record leaves out; the fake drops NULL fields, so either reads
//!   the same).
//! - A left-out column's values are recognisable (`name`, `quantity`: `left-out-<n>`, and
//!   `LEFT_OUT_QTY` plus n), and no request to Feldera may carry one, in its URL or its body
//!   (`assert_nothing_left_out`).
//!
//! The fake evaluates a filter by recognising the text it answered (`evaluate`), not by
//! parsing SQL: any other text is a harness failure.

use std::collections::BTreeMap;

use serde_json::Value;

use super::catalog::relation;
use super::pg::{ITEMS, USERS};
use super::workload::Key;
use crate::pgoutput::{encode, OldKind, Relation};

/// The row filter of `users`, as PostgreSQL prints `WHERE (id % 3 <> 0)` (the implicit
/// cast of 3 to bigint is not shown).
pub(super) const USERS_FILTER: &str = "((id % 3) <> 0)";
/// The row filter of `items`, as PostgreSQL prints `WHERE (sku <> 's1')`.
pub(super) const ITEMS_FILTER: &str = "(sku <> 's1'::text)";
/// A left-out `users.name` is this followed by the change's number.
pub(super) const LEFT_OUT_NAME: &str = "left-out-";
/// A left-out `items.qty` is this plus the change's number: ten digits, which no id, sku
/// or published quantity of a run reaches.
pub(super) const LEFT_OUT_QTY: u64 = 2_000_000_000;
/// The span of left-out quantities a run can generate.
const LEFT_OUT_QTY_SPAN: u64 = 100_000_000;

/// One table of the fake: Feldera's segment, PostgreSQL's oid, its key column, its other
/// column, and its filter when the publication has one.
struct Table {
    name: &'static str,
    oid: u32,
    key: &'static str,
    value: &'static str,
    filter: &'static str,
}

const TABLES: [Table; 2] = [
    Table {
        name: "users",
        oid: USERS,
        key: "id",
        value: "name",
        filter: USERS_FILTER,
    },
    Table {
        name: "items",
        oid: ITEMS,
        key: "sku",
        value: "qty",
        filter: ITEMS_FILTER,
    },
];

fn table(name: &str) -> &'static Table {
    TABLES
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("the fake has no table {name:?}"))
}

fn table_of_oid(oid: u32) -> &'static Table {
    TABLES
        .iter()
        .find(|t| t.oid == oid)
        .unwrap_or_else(|| panic!("the fake has no table of oid {oid}"))
}

/// What the publication publishes of one table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Shape {
    /// The table's row filter (`USERS_FILTER`, `ITEMS_FILTER`).
    pub(super) filter: bool,
    /// A column list of the key column alone.
    pub(super) list: bool,
}

/// What the publication publishes of both tables (see the module docs). The default
/// publishes everything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Publication {
    pub(super) users: Shape,
    pub(super) items: Shape,
}

/// The publications a setup can pick (`Setup::publication`).
const CHOICES: [Publication; 4] = [
    Publication {
        users: Shape {
            filter: false,
            list: false,
        },
        items: Shape {
            filter: false,
            list: false,
        },
    },
    Publication {
        users: Shape {
            filter: true,
            list: false,
        },
        items: Shape {
            filter: false,
            list: true,
        },
    },
    Publication {
        users: Shape {
            filter: false,
            list: true,
        },
        items: Shape {
            filter: true,
            list: false,
        },
    },
    Publication {
        users: Shape {
            filter: true,
            list: true,
        },
        items: Shape {
            filter: true,
            list: true,
        },
    },
];

/// A JSON value as PostgreSQL's text output writes it.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether `row` satisfies `filter`, one of the texts the fake answers: the fake
/// recognises its own texts and parses no SQL.
pub(super) fn evaluate(filter: &str, row: &Value) -> bool {
    match filter {
        USERS_FILTER => {
            let Some(id) = row.get("id").and_then(Value::as_u64) else {
                panic!("the users filter {filter} on a row without an id: {row}");
            };
            id % 3 != 0
        }
        ITEMS_FILTER => {
            let Some(sku) = row.get("sku").and_then(Value::as_str) else {
                panic!("the items filter {filter} on a row without a sku: {row}");
            };
            sku != "s1"
        }
        other => panic!("a row filter the fake never answered: {other}"),
    }
}

impl Publication {
    /// Choice `index` (wrapping): 0 publishes everything; 1 filters users and lists only
    /// items' key; 2 lists only users' key and filters items; 3 does both to both.
    pub(super) fn choice(index: u8) -> Publication {
        CHOICES[usize::from(index) % CHOICES.len()]
    }

    fn shape(&self, table: &str) -> Shape {
        match table {
            "users" => self.users,
            "items" => self.items,
            other => panic!("the fake has no table {other:?}"),
        }
    }

    /// The row filter of `table`, as `pg_publication_tables` answers it.
    pub(super) fn filter(&self, name: &str) -> Option<&'static str> {
        self.shape(name).filter.then_some(table(name).filter)
    }

    /// Whether the column list of `table` leaves out its non-key column.
    pub(super) fn leaves_out(&self, name: &str) -> bool {
        self.shape(name).list
    }

    /// The published columns of `table`, in its order.
    pub(super) fn columns(&self, name: &str) -> Vec<&'static str> {
        let t = table(name);
        match self.leaves_out(name) {
            true => vec![t.key],
            false => vec![t.key, t.value],
        }
    }

    /// The answer to `catalog::questions::published_tables_query`: schema, table, no
    /// ancestor, the column list as a JSON array (`NULL`: every column), the filter.
    pub(super) fn catalog_rows(&self) -> Vec<Vec<Option<String>>> {
        ["items", "users"]
            .into_iter()
            .map(|name| {
                let columns = self.leaves_out(name).then(|| {
                    let names: Vec<String> = self
                        .columns(name)
                        .iter()
                        .map(|c| format!("\"{c}\""))
                        .collect();
                    format!("[{}]", names.join(", "))
                });
                vec![
                    Some("public".to_owned()),
                    Some(name.to_owned()),
                    None,
                    None,
                    columns,
                    self.filter(name).map(str::to_owned),
                ]
            })
            .collect()
    }

    /// The Relation message of table `oid`: only the published columns.
    pub(super) fn relation(&self, oid: u32) -> Relation {
        let mut relation = relation(oid);
        let columns = self.columns(table_of_oid(oid).name);
        relation
            .columns
            .retain(|c| columns.contains(&c.name.as_str()));
        relation
    }

    /// Whether the publication publishes `row` of `table`.
    pub(super) fn publishes(&self, name: &str, row: &Value) -> bool {
        self.filter(name).is_none_or(|filter| evaluate(filter, row))
    }

    /// Whether it publishes the row of `key` (the key's JSON text): the filters name the key
    /// column alone.
    pub(super) fn publishes_key(&self, key: &Key) -> bool {
        let t = table(key.0);
        let Ok(value) = serde_json::from_str::<Value>(&key.1) else {
            panic!("a key that is not JSON: {key:?}");
        };
        let mut row = serde_json::Map::new();
        row.insert(t.key.to_owned(), value);
        self.publishes(t.name, &Value::Object(row))
    }

    /// `row` of `table` as the publication publishes it: `None` outside the filter, else
    /// only the published columns.
    pub(super) fn view(&self, name: &str, row: &Value) -> Option<Value> {
        if !self.publishes(name, row) {
            return None;
        }
        let mut row = row.clone();
        if let (true, Some(fields)) = (self.leaves_out(name), row.as_object_mut()) {
            fields.retain(|field, _| field == table(name).key);
        }
        Some(row)
    }

    /// Every row of `rows` as the publication publishes it (see `view`).
    pub(super) fn view_rows(&self, rows: &BTreeMap<Key, Value>) -> BTreeMap<Key, Value> {
        rows.iter()
            .filter_map(|(key, row)| Some((key.clone(), self.view(key.0, row)?)))
            .collect()
    }

    /// The name of a user written by change number `n`: recognisable when the column list
    /// leaves `users.name` out (see the module docs).
    pub(super) fn name(&self, n: u64) -> String {
        match self.leaves_out("users") {
            true => format!("{LEFT_OUT_NAME}{n}"),
            false => format!("r{n}"),
        }
    }

    /// The quantity of an item written by change number `n`: recognisable when the column
    /// list leaves `items.qty` out.
    pub(super) fn quantity(&self, n: u64) -> u64 {
        match self.leaves_out("items") {
            true => LEFT_OUT_QTY + n,
            false => n,
        }
    }

    /// The tuple of a row (its key and other column, as text): only the published columns.
    fn tuple<'a>(&self, name: &str, key: &'a str, value: Option<&'a str>) -> Vec<Option<&'a str>> {
        match self.leaves_out(name) {
            true => vec![Some(key)],
            false => vec![Some(key), value],
        }
    }

    /// What pgoutput sends for one change of a row of `table` from `old` to `new` (`None`:
    /// no row, so an INSERT or a DELETE), as PostgreSQL decides it (see the module docs): the
    /// message, and the text Feldera must hold once the commit is acknowledged (the same
    /// markers as before publications were modelled when every column is published). `None`:
    /// nothing is published.
    pub(super) fn message(
        &self,
        name: &'static str,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Option<(Vec<u8>, String)> {
        let t = table(name);
        let old = old.filter(|row| self.publishes(name, row));
        let new = new.filter(|row| self.publishes(name, row));
        let key = |row: &Value| row.get(t.key).map(text).unwrap_or_default();
        let value = |row: &Value| row.get(t.value).map(text);
        match (old, new) {
            (None, None) => None,
            (Some(old), None) => {
                let old_key = key(old);
                let tuple = encode::row(&self.tuple(name, &old_key, None));
                let marker = match name {
                    "users" => format!("{{\"delete\":{{\"id\":{old_key}}}}}"),
                    _ => format!("{{\"delete\":{{\"sku\":\"{old_key}\""),
                };
                Some((encode::delete(t.oid, OldKind::Key, tuple), marker))
            }
            (old, Some(new)) => {
                let (new_key, new_value) = (key(new), value(new));
                let old_key = old.map(key);
                let tuple = encode::row(&self.tuple(name, &new_key, new_value.as_deref()));
                let payload = match &old_key {
                    None => encode::insert(t.oid, tuple),
                    Some(old_key) if *old_key == new_key => encode::update(t.oid, None, tuple),
                    // A new key: PostgreSQL logs the old one with the update.
                    Some(old_key) => {
                        let old_tuple = encode::row(&self.tuple(name, old_key, None));
                        encode::update(t.oid, Some((OldKind::Key, old_tuple)), tuple)
                    }
                };
                let marker = match (self.leaves_out(name), name) {
                    (true, "users") => format!("{{\"insert\":{{\"id\":{new_key}}}}}"),
                    (true, _) => format!("{{\"insert\":{{\"sku\":\"{new_key}\"}}}}"),
                    (false, "users") => format!("\"{}\"", new_value.unwrap_or_default()),
                    (false, _) => format!(
                        "{{\"sku\":\"{new_key}\",\"qty\":{}}}",
                        new_value.unwrap_or_default()
                    ),
                };
                Some((payload, marker))
            }
        }
    }

    /// A snapshot row as the COPY's text format writes it: only the published columns (no
    /// value the workload writes needs escaping).
    pub(super) fn copy_line(&self, name: &str, row: &Value) -> String {
        let values: Vec<String> = self
            .columns(name)
            .iter()
            .map(|column| row.get(*column).map_or_else(|| "\\N".to_owned(), text))
            .collect();
        format!("{}\n", values.join("\t"))
    }

    /// Checks the COPY statement of `table` (`inner`: after `COPY (`) reads what the
    /// publication publishes: it selects exactly the published columns in the table's order
    /// and its WHERE holds exactly the filter, besides `ctid` bounds. Returns the filter
    /// text it carries, which the rows are then evaluated with.
    pub(super) fn check_copy(&self, name: &str, inner: &str) -> Option<String> {
        let wanted: Vec<String> = self
            .columns(name)
            .iter()
            .map(|c| format!("\"{c}\""))
            .collect();
        let selected = inner
            .strip_prefix("SELECT ")
            .and_then(|rest| rest.split(" FROM ").next())
            .unwrap_or_else(|| panic!("a COPY the fake cannot read: {inner}"));
        assert_eq!(
            selected,
            wanted.join(", "),
            "a COPY of {name} that does not select exactly the published columns ({}): {inner}",
            wanted.join(", ")
        );
        let body = inner
            .strip_suffix(") TO STDOUT")
            .unwrap_or_else(|| panic!("a COPY the fake cannot read: {inner}"));
        let conditions: Vec<&str> = match body.split_once(" WHERE ") {
            Some((_, conditions)) => conditions.split(" AND ").collect(),
            None => Vec::new(),
        };
        let mut filters = Vec::new();
        for condition in conditions {
            if condition.starts_with("ctid >= '(") || condition.starts_with("ctid < '(") {
                continue;
            }
            match condition
                .strip_prefix('(')
                .and_then(|c| c.strip_suffix(')'))
            {
                Some(filter) => filters.push(filter.to_owned()),
                None => panic!("a COPY condition the fake does not know ({condition}): {inner}"),
            }
        }
        let wanted = self.filter(name).map(str::to_owned);
        assert_eq!(
            filters.first(),
            wanted.as_ref(),
            "a COPY of {name} that does not apply exactly the publication's row filter ({}): {inner}",
            wanted.as_deref().unwrap_or("none")
        );
        assert!(
            filters.len() <= 1,
            "a COPY of {name} with conditions the fake does not know: {inner}"
        );
        filters.pop()
    }

    /// Checks the leftover question about `table` carries the publication's filter (`AND
    /// (<filter>)` after the keys) and returns the question without it.
    pub(super) fn check_existence<'a>(&self, name: &str, sql: &'a str) -> &'a str {
        match self.filter(name) {
            Some(filter) => sql
                .strip_suffix(&format!(" AND ({filter})"))
                .unwrap_or_else(|| {
                    panic!(
                        "a leftover question about {name} that does not apply the publication's row filter {filter}: {sql}"
                    )
                }),
            None => {
                assert!(
                    !sql.contains(" AND "),
                    "a leftover question about {name} with a condition the publication does not have: {sql}"
                );
                sql
            }
        }
    }

    /// No request to Feldera carries a value of a column the publication leaves out
    /// (`what` says which part of which request `text` is).
    pub(super) fn assert_nothing_left_out(&self, what: &str, text: &str) {
        if self.leaves_out("users") {
            assert!(
                !text.contains(LEFT_OUT_NAME),
                "{what} carries a value of users.name, which the publication's column list leaves out: {text}"
            );
        }
        if self.leaves_out("items") {
            let found = text
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|digits| digits.parse::<u64>().ok())
                .find(|n| (LEFT_OUT_QTY..LEFT_OUT_QTY + LEFT_OUT_QTY_SPAN).contains(n));
            assert!(
                found.is_none(),
                "{what} carries {found:?}, a value of items.qty, which the publication's column list leaves out: {text}"
            );
        }
    }
}
