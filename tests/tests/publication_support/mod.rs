//! What the publication tests (`e2e_publication`, `e2e_publication_change`) share: Feldera
//! schemas for their tables, an environment whose double keeps every request body, starting
//! and stopping the connector, findings reported together at a scenario's end, and the
//! comparison of a Feldera table with what the publication publishes.
//!
//! Both scenarios' tables are `users` keyed by `id` and `items` keyed by `sku`; every value
//! they write to `items.blob` starts with [`SECRET`].

use serde_json::{json, Value};
use slotline_tests::e2e::{Connector, Env, Shell};
use slotline_tests::feldera_double::DoubleConfig;
use std::collections::BTreeMap;
use std::time::Duration;

/// Every value of `items.blob` starts with this, so that a request body holding one is
/// found by it.
pub const SECRET: &str = "SECRET-";

pub fn column(name: &str, ty: Value) -> Value {
    json!({"name": name, "case_sensitive": false, "columntype": ty})
}

pub fn int(nullable: bool) -> Value {
    json!({"type": "INTEGER", "nullable": nullable})
}

pub fn varchar(nullable: bool) -> Value {
    json!({"type": "VARCHAR", "nullable": nullable, "precision": -1})
}

pub fn table(name: &str, key: &str, fields: Vec<Value>) -> Value {
    json!({"name": name, "case_sensitive": false, "primary_key": [key], "materialized": true,
           "properties": {}, "fields": fields})
}

/// An environment whose double keeps every request body.
pub fn env_with_capture(prefix: &str, setup: &str, schema: Value) -> Env {
    Env::with_double(
        prefix,
        setup,
        DoubleConfig::new("p", schema).with_body_capture(true),
    )
}

/// Started with `tables` copied first (`SNAPSHOT_MODE=initial`) and the `extra` settings.
pub fn start(env: &Env, shell: Shell, tables: &str, extra: &[(&str, &str)]) -> Connector {
    let mut pairs = vec![("TABLES", tables), ("SNAPSHOT_MODE", "initial")];
    pairs.extend_from_slice(extra);
    env.start(shell, &pairs)
}

/// Started as `start` does, with the copy complete and every commit so far acknowledged
/// within `long`.
pub fn copied(
    env: &Env,
    shell: Shell,
    tables: &str,
    extra: &[(&str, &str)],
    long: Duration,
) -> Connector {
    let connector = start(env, shell, tables, extra);
    assert!(
        env.wait_snapshot_complete_and_caught_up(long),
        "the copy did not finish:\n{}",
        connector.log_text()
    );
    connector
}

/// Every commit so far acknowledged within `long`.
pub fn caught_up(env: &Env, connector: &Connector, long: Duration) {
    assert!(
        env.wait_caught_up(long),
        "the connector did not catch up:\n{}",
        connector.log_text()
    );
}

/// A graceful stop (exit 0) within `long`.
pub fn stopped(connector: &mut Connector, long: Duration) {
    assert_eq!(
        connector.stop(long),
        Some(0),
        "a graceful stop:\n{}",
        connector.log_text()
    );
}

/// Failed checks of one scenario, reported together at its end.
#[derive(Debug, Default)]
pub struct Findings(Vec<String>);

impl Findings {
    pub fn check(&mut self, result: Result<(), String>) {
        if let Err(finding) = result {
            eprintln!("finding: {finding}");
            self.0.push(finding);
        }
    }

    /// A finding, told by `what`, unless `holds`.
    pub fn expect(&mut self, holds: bool, what: impl FnOnce() -> String) {
        self.check(if holds { Ok(()) } else { Err(what()) });
    }

    /// Panics naming every finding, with `connector`'s log, if there are any.
    pub fn finish(self, connector: &Connector) {
        if self.0.is_empty() {
            return;
        }
        panic!(
            "{} check(s) failed:\n- {}\n--- connector log\n{}",
            self.0.len(),
            self.0.join("\n- "),
            connector.log_text()
        );
    }
}

/// Feldera's `table` against PostgreSQL's rows of `query`, matched by `key`: the rows
/// missing from Feldera, the rows Feldera holds that it should not, and the rows that
/// differ (a few of each, and how many).
pub fn feldera_equals(
    env: &Env,
    table: &str,
    key: &str,
    query: &str,
    what: &str,
) -> Result<(), String> {
    let by_key = |rows: Vec<Value>| -> BTreeMap<String, Value> {
        rows.into_iter().map(|r| (r[key].to_string(), r)).collect()
    };
    let expected = by_key(env.pg_rows(&format!("({query})"), key));
    let held = by_key(env.feldera_rows(table, key));
    let missing: Vec<String> = expected
        .iter()
        .filter(|(k, _)| !held.contains_key(*k))
        .map(|(_, row)| row.to_string())
        .collect();
    let extra: Vec<String> = held
        .iter()
        .filter(|(k, _)| !expected.contains_key(*k))
        .map(|(_, row)| row.to_string())
        .collect();
    let differ: Vec<String> = expected
        .iter()
        .filter_map(|(k, row)| {
            let feldera = held.get(k)?;
            (feldera != row).then(|| format!("Feldera {feldera} / published {row}"))
        })
        .collect();
    if missing.is_empty() && extra.is_empty() && differ.is_empty() {
        return Ok(());
    }
    let few = |rows: &[String]| rows.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
    Err(format!(
        "{what}: Feldera's {table} ({} rows) is not the published set ({} rows): \
         {} missing [{}], {} not published [{}], {} differ [{}]",
        held.len(),
        expected.len(),
        missing.len(),
        few(&missing),
        extra.len(),
        few(&extra),
        differ.len(),
        few(&differ),
    ))
}

/// Feldera's users equal PostgreSQL's rows of `users`, and its items those of `items`.
pub fn published_sets(env: &Env, findings: &mut Findings, users: &str, items: &str, what: &str) {
    findings.check(feldera_equals(env, "users", "id", users, what));
    findings.check(feldera_equals(env, "items", "sku", items, what));
}
