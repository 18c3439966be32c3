//! What `GET .../stats` says about the pipeline's HTTP ingress endpoints: whether one of
//! them may still hold the body of a request nobody waits for any more.
//!
//! Feldera keeps one HTTP input endpoint per table and format, named
//! `<table>.api-ingress-<hash>`, created before the request's body is read; the endpoint
//! reads a body only while it runs: the pipeline `Running` (not bootstrapping), the
//! endpoint not paused by the user and its queue not full (the controller's backpressure
//! thread: full at 100,000 records or 100 MB queued, `server.rs` and `config.rs`). An
//! endpoint that runs reads what it holds at once. So a table may still have a held body
//! when one of its endpoints exists and does not run, or when its counters still move; it
//! has none when no endpoint of it exists (a restarted pipeline has none until the next
//! request) or when its endpoints run and their counters stay still (docs/feldera.md,
//! "Bodies that outlive their request").
//!
//! Owns: reading those fields (`global_metrics.state`, `bootstrap_in_progress`, and each of
//! `inputs[]`'s `endpoint_name`, `paused` and `metrics` `total_records`, `total_bytes`,
//! `buffered_records`, `buffered_bytes`). Never decides what a table may do: `pipeline::feldera_link`
//! does.

use std::collections::BTreeMap;

use serde_json::Value;

use super::response::{is_success, Reply};
use crate::schema::names::percent_encode_component;

/// What marks an HTTP ingress endpoint's name, after the table's name.
const INGRESS_MARK: &str = ".api-ingress";

/// An endpoint with this many records (or [`BUSY_BYTES`]) queued counts as one that may
/// not read: half of the HTTP endpoint's queue (100,000 records, 100 MB), so a queue
/// close to full is counted too.
const BUSY_RECORDS: u64 = 50_000;
const BUSY_BYTES: u64 = 50_000_000;

/// One table's HTTP ingress endpoints, summed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableIngress {
    /// How many endpoints the table has.
    pub endpoints: u64,
    /// One of them is paused by the user, or its queue is (close to) full: it may not
    /// read a body it holds.
    pub busy: bool,
    /// Their `total_records` and `total_bytes`: bodies read so far.
    pub records: u64,
    pub bytes: u64,
}

impl TableIngress {
    /// Whether the table's endpoints read what they hold now: none exists, or the
    /// pipeline runs and none is busy.
    pub fn idle(&self, running: bool) -> bool {
        self.endpoints == 0 || (running && !self.busy)
    }

    /// Whether nothing was read between `self` and `later`.
    pub fn still(&self, later: &TableIngress) -> bool {
        self.endpoints == later.endpoints
            && self.records == later.records
            && self.bytes == later.bytes
    }

    fn add(&mut self, other: &TableIngress) {
        self.endpoints += other.endpoints;
        self.busy |= other.busy;
        self.records = self.records.saturating_add(other.records);
        self.bytes = self.bytes.saturating_add(other.bytes);
    }
}

/// The ingress side of a `/stats` answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IngressStats {
    /// The pipeline reads its inputs: `Running` and not bootstrapping.
    pub running: bool,
    /// Each table's endpoints by the table's URL segment (`Name::url_segment`, as
    /// slotline's requests name it); `None` when the answer has no `inputs` list (nothing
    /// is known of the endpoints).
    pub tables: Option<BTreeMap<String, TableIngress>>,
}

impl IngressStats {
    /// The endpoints of the table at `segment` (none when it has none).
    pub fn table(&self, segment: &str) -> TableIngress {
        self.tables
            .as_ref()
            .and_then(|tables| tables.get(segment))
            .cloned()
            .unwrap_or_default()
    }

    /// Every table's endpoints together.
    pub fn all(&self) -> TableIngress {
        let mut sum = TableIngress::default();
        for table in self.tables.iter().flat_map(BTreeMap::values) {
            sum.add(table);
        }
        sum
    }
}

/// The ingress side of a `/stats` answer; `None` when it is not a usable answer (no
/// answer, an error status, no `global_metrics.state`).
pub fn ingress_stats(reply: Reply<'_>) -> Option<IngressStats> {
    let Reply::Answered { status, body } = reply else {
        return None;
    };
    if !is_success(status) {
        return None;
    }
    let root: Value = serde_json::from_slice(body).ok()?;
    let metrics = root.get("global_metrics")?;
    let state = metrics.get("state")?.as_str()?;
    let bootstrapping = metrics
        .get("bootstrap_in_progress")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let tables = root.get("inputs").and_then(Value::as_array).map(|inputs| {
        let mut tables: BTreeMap<String, TableIngress> = BTreeMap::new();
        for input in inputs {
            let Some((segment, endpoint)) = endpoint(input) else {
                continue;
            };
            tables.entry(segment).or_default().add(&endpoint);
        }
        tables
    });
    Some(IngressStats {
        running: state == "Running" && !bootstrapping,
        tables,
    })
}

/// One `inputs[]` entry of an HTTP ingress endpoint, with its table's URL segment; `None`
/// for other connectors. A counter Feldera leaves out reads 0, a missing `paused` false.
fn endpoint(input: &Value) -> Option<(String, TableIngress)> {
    let name = input.get("endpoint_name")?.as_str()?;
    let (table, _) = name.split_once(INGRESS_MARK)?;
    if table.is_empty() {
        return None;
    }
    let metrics = input.get("metrics");
    let counter = |field: &str| {
        metrics
            .and_then(|m| m.get(field))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let paused = input
        .get("paused")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Some((
        percent_encode_component(table),
        TableIngress {
            endpoints: 1,
            busy: paused
                || counter("buffered_records") >= BUSY_RECORDS
                || counter("buffered_bytes") >= BUSY_BYTES,
            records: counter("total_records"),
            bytes: counter("total_bytes"),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(body: &Value) -> Option<IngressStats> {
        let bytes = body.to_string();
        ingress_stats(Reply::Answered {
            status: 200,
            body: bytes.as_bytes(),
        })
    }

    fn input(name: &str, paused: bool, buffered: u64, records: u64) -> Value {
        json!({"endpoint_name": name, "paused": paused,
               "metrics": {"total_records": records, "total_bytes": records * 10,
                           "buffered_records": buffered}})
    }

    #[test]
    fn endpoints_are_summed_per_table_under_the_segment_slotline_sends() {
        let stats = answer(&json!({
            "global_metrics": {"state": "Running", "bootstrap_in_progress": false},
            "inputs": [
                input("users.api-ingress-00ff00ff00ff00ff", false, 0, 5),
                input("users.api-ingress-11ff00ff00ff00ff", false, BUSY_RECORDS, 7),
                input("\"Mixed Case\".api-ingress-22ff00ff00ff00ff", true, 0, 1),
                input("kafka_in", false, 9, 9),
            ],
        }))
        .expect("usable");
        assert!(stats.running);
        let users = stats.table("users");
        assert_eq!(
            users,
            TableIngress {
                endpoints: 2,
                busy: true,
                records: 12,
                bytes: 120,
            }
        );
        assert!(!users.idle(true), "a queue half full");
        let below = answer(&json!({"global_metrics": {"state": "Running"},
            "inputs": [input("users.api-ingress-1", false, BUSY_RECORDS - 1, 7)]}))
        .expect("usable");
        assert!(below.table("users").idle(true));
        let mixed = stats.table("%22Mixed%20Case%22");
        assert_eq!(mixed.endpoints, 1);
        assert!(mixed.busy, "paused by the user");
        assert_eq!(stats.table("items"), TableIngress::default());
        assert!(
            stats.table("items").idle(false),
            "no endpoint holds nothing"
        );
        assert_eq!(
            stats.all().endpoints,
            3,
            "the Kafka connector is no ingress"
        );
    }

    #[test]
    fn a_paused_or_bootstrapping_pipeline_does_not_run_and_no_inputs_list_is_unknown() {
        let paused = answer(&json!({"global_metrics": {"state": "Paused"},
            "inputs": [input("users.api-ingress-1", false, 0, 5)]}))
        .expect("usable");
        assert!(!paused.running);
        assert!(!paused.table("users").idle(paused.running));
        let booting = answer(&json!({"global_metrics": {"state": "Running",
            "bootstrap_in_progress": true}, "inputs": []}))
        .expect("usable");
        assert!(!booting.running);
        let unknown = answer(&json!({"global_metrics": {"state": "Running"}})).expect("usable");
        assert_eq!(unknown.tables, None);
        assert_eq!(
            ingress_stats(Reply::Answered {
                status: 503,
                body: b"{}"
            }),
            None
        );
        assert_eq!(ingress_stats(Reply::Failed { error: "reset" }), None);
        assert_eq!(answer(&json!({"global_metrics": {}})), None);
    }

    #[test]
    fn stillness_compares_what_was_read() {
        let before = TableIngress {
            endpoints: 1,
            busy: false,
            records: 10,
            bytes: 100,
        };
        let mut after = before.clone();
        assert!(before.still(&after));
        after.bytes = 101;
        assert!(!before.still(&after));
        after = before.clone();
        after.endpoints = 2;
        assert!(!before.still(&after), "a new endpoint is a new request");
    }
}
