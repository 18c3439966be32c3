//! The scripted harness's model of Feldera's tables: what completed ingress requests left in
//! each keyed table, and the answers to the two ad-hoc queries slotline sends (a row count,
//! every single-column key). Just enough for decision traces of the snapshot
//! and of retraction; the end-to-end tests use the real HTTP double.

use serde_json::{Map, Value};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// A key value ordered as Feldera's `ORDER BY` orders integers and strings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyValue {
    Int(i64),
    Text(String),
}

impl Ord for KeyValue {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (KeyValue::Int(a), KeyValue::Int(b)) => a.cmp(b),
            (KeyValue::Text(a), KeyValue::Text(b)) => a.cmp(b),
            (KeyValue::Int(_), KeyValue::Text(_)) => Ordering::Less,
            (KeyValue::Text(_), KeyValue::Int(_)) => Ordering::Greater,
        }
    }
}

impl PartialOrd for KeyValue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl KeyValue {
    fn of(value: &Value) -> Option<KeyValue> {
        match value {
            Value::Number(n) => n.as_i64().map(KeyValue::Int),
            Value::String(s) => Some(KeyValue::Text(s.clone())),
            _ => None,
        }
    }

    fn json(&self) -> Value {
        match self {
            KeyValue::Int(i) => Value::from(*i),
            KeyValue::Text(s) => Value::from(s.clone()),
        }
    }
}

/// Every keyed table: its key column and rows by key.
#[derive(Clone, Debug, Default)]
pub struct FakeFeldera {
    tables: BTreeMap<String, (String, BTreeMap<KeyValue, Value>)>,
}

impl FakeFeldera {
    /// Declares `table` (lowercase) with the single key column `key`.
    pub fn table(&mut self, table: &str, key: &str) {
        self.tables
            .entry(table.to_owned())
            .or_insert_with(|| (key.to_owned(), BTreeMap::new()));
    }

    /// Applies a completed ingress body (`insert_delete` NDJSON) to `table`.
    /// A restart without fault tolerance: every table comes back empty.
    pub fn empty_all(&mut self) {
        for (_, rows) in self.tables.values_mut() {
            rows.clear();
        }
    }

    pub fn apply(&mut self, table: &str, body: &str) {
        let Some((key, rows)) = self.tables.get_mut(table) else {
            return;
        };
        for line in body.lines() {
            let Ok(Value::Object(event)) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            for (kind, row) in event {
                let Some(k) = row.get(key.as_str()).and_then(KeyValue::of) else {
                    continue;
                };
                match kind.as_str() {
                    "insert" => {
                        rows.insert(k, row);
                    }
                    "delete" => {
                        rows.remove(&k);
                    }
                    _ => {}
                }
            }
        }
    }

    pub fn keys(&self, table: &str) -> Vec<Value> {
        self.tables
            .get(table)
            .map(|(_, rows)| rows.keys().map(KeyValue::json).collect())
            .unwrap_or_default()
    }

    /// Every row of `table`, in key order.
    pub fn contents(&self, table: &str) -> Vec<Value> {
        self.tables
            .get(table)
            .map(|(_, rows)| rows.values().cloned().collect())
            .unwrap_or_default()
    }

    pub fn rows(&self, table: &str) -> usize {
        self.tables.get(table).map_or(0, |(_, rows)| rows.len())
    }

    /// Answers a count or key-scan query as NDJSON, or `None` for SQL it does not model.
    pub fn query(&self, sql: &str) -> Option<String> {
        let table = sql.split(" FROM \"").nth(1)?.split('"').next()?.to_owned();
        let (_, rows) = self.tables.get(&table)?;
        if sql.ends_with(" LIMIT 0") {
            // `retract::probe_query`.
            return Some(String::new());
        }
        if sql.starts_with("SELECT COUNT(*)") {
            let alias = sql.split(" AS \"").nth(1)?.split('"').next()?;
            return Some(format!("{{\"{alias}\":{}}}\n", rows.len()));
        }
        // The scan of every key (`retract::scan_query`), in no promised order.
        let mut out = String::new();
        for key in rows.keys() {
            let mut row = Map::new();
            row.insert("k0".into(), key.json());
            out.push_str(&Value::Object(row).to_string());
            out.push('\n');
        }
        Some(out)
    }
}
